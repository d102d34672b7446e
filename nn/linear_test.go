package nn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// refLinear is y[r,o] = Σ_i x[r,i]·w[o,i] (+ b[o]) over every leading
// dimension of x as rows.
func refLinear(x, w, b []float64, out, inF int) []float64 {
	rows := len(x) / inF
	y := make([]float64, rows*out)
	for r := 0; r < rows; r++ {
		for o := 0; o < out; o++ {
			var s float64
			for i := 0; i < inF; i++ {
				s += x[r*inF+i] * w[o*inF+i]
			}
			if b != nil {
				s += b[o]
			}
			y[r*out+o] = s
		}
	}
	return y
}

func TestLinearGradcheck(t *testing.T) {
	cases := []struct {
		x    []int
		out  int
		bias bool
	}{
		{[]int{1, 1}, 1, true},
		{[]int{3, 4, 5}, 7, true},
		{[]int{5, 3}, 2, false},
		{[]int{2, 3, 9}, 4, false},
		{[]int{7, 1, 13}, 11, true},
	}
	for i, c := range cases {
		inF := c.x[len(c.x)-1]
		inputs := []*tensor.Tensor{
			gradcheck.Randn(uint64(i), 1, c.x...),
			gradcheck.Randn(uint64(i+10), 0.5, c.out, inF),
		}
		grads := []bool{true, true}
		if c.bias {
			inputs = append(inputs, gradcheck.Randn(uint64(i+20), 0.5, c.out))
			grads = append(grads, true)
		}
		err := gradcheck.Check(gradcheck.Case{
			Inputs: inputs,
			Grad:   grads,
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				t.SetWorkers(3) // Linear is a GEMM; workers must not matter
				if c.bias {
					return nn.Linear(t, in[0], in[1], in[2])
				}
				return nn.Linear(t, in[0], in[1], nil)
			},
			Ref: func(in [][]float64) []float64 {
				var b []float64
				if c.bias {
					b = in[2]
				}
				return refLinear(in[0], in[1], b, c.out, inF)
			},
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("x %v, out %d, bias %v: %v", c.x, c.out, c.bias, err)
		}
	}
}

func TestLinearNonContiguousInput(t *testing.T) {
	// x is a transposed view; the result must equal that of its copy.
	base := gradcheck.Randn(1, 1, 6, 4)
	w, b := gradcheck.Randn(2, 1, 3, 6), gradcheck.Randn(3, 1, 3)
	op := func(t *autograd.Tape, in []*autograd.Var) *autograd.Var { return nn.Linear(t, in[0], in[1], in[2]) }
	r1, err := run(1, []*tensor.Tensor{base.Transpose(0, 1), w, b}, []bool{true, true, true}, op, 5)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := run(1, []*tensor.Tensor{base.Transpose(0, 1).Contiguous(), w, b}, []bool{true, true, true}, op, 5)
	if err != nil {
		t.Fatal(err)
	}
	numtest.SameBits(t, "output", r1.out, r2.out)
	for i := range r1.grads {
		numtest.SameBits(t, fmt.Sprintf("gradient %d", i), r1.grads[i], r2.grads[i])
	}
}

func TestLinearFrozenInputs(t *testing.T) {
	x, w, b := gradcheck.Randn(1, 1, 4, 5), gradcheck.Randn(2, 1, 3, 5), gradcheck.Randn(3, 1, 3)
	op := func(t *autograd.Tape, in []*autograd.Var) *autograd.Var { return nn.Linear(t, in[0], in[1], in[2]) }
	all, err := run(1, []*tensor.Tensor{x, w, b}, []bool{true, true, true}, op, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range [][]bool{{false, true, true}, {true, false, true}, {true, true, false}, {true, false, false}} {
		r, err := run(1, []*tensor.Tensor{x, w, b}, req, op, 7)
		if err != nil {
			t.Fatal(err)
		}
		for i := range req {
			switch {
			case !req[i] && r.grads[i] != nil:
				t.Errorf("requires %v: input %d does not require grad but got one", req, i)
			case req[i]:
				numtest.SameBits(t, fmt.Sprintf("requires %v: gradient %d", req, i), r.grads[i], all.grads[i])
			}
		}
	}
}

func TestLinearDirectAccumulation(t *testing.T) {
	x, w, b := gradcheck.Randn(1, 1, 3, 2, 5), gradcheck.Randn(2, 1, 4, 5), gradcheck.Randn(3, 1, 4)
	checkDirectAccumulation(t, directCase{
		name: "linear with bias", inputs: []*tensor.Tensor{x, w, b}, requires: []bool{true, true, true}, params: []int{1, 2},
		op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var { return nn.Linear(t, in[0], in[1], in[2]) },
	})
	checkDirectAccumulation(t, directCase{
		name: "linear without bias", inputs: []*tensor.Tensor{x, w}, requires: []bool{false, true}, params: []int{1},
		op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var { return nn.Linear(t, in[0], in[1], nil) },
	})
}

func TestLinearShapeError(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	w := autograd.NewLeaf(tensor.New(3, 4), "decoder.layers.0.mlp.linear_fc1.weight", true)
	nn.Linear(tape, autograd.Const(tensor.New(2, 5)), w, nil)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "linear_fc1") || !strings.Contains(err.Error(), "[3, 4]") {
		t.Fatalf("err = %v, want it to name the weight and its shape", err)
	}
}

func TestParameterAndGradBuffer(t *testing.T) {
	p := nn.NewParameter("embedding.word_embeddings.weight", tensor.New(5, 3))
	if !p.RequiresGrad() || p.Name != "embedding.word_embeddings.weight" || p.PartitionDim != -1 || p.PartitionStride != 1 {
		t.Fatalf("NewParameter: %+v", p)
	}
	g := nn.GradBuffer(p.Var)
	if g != p.Grad || g.Len() != 15 {
		t.Fatal("GradBuffer did not allocate the parameter's Grad")
	}
	if nn.GradBuffer(p.Var) != g {
		t.Fatal("GradBuffer replaced an existing Grad")
	}
}
