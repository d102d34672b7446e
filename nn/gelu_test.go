package nn_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// refGELU is the tanh approximation ½u(1 + tanh(√(2/π)(u + 0.044715u³)))
// (Hendrycks and Gimpel 2016, as Megatron's bias_gelu).
func refGELU(u float64) float64 {
	return 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
}

func refBiasGELU(x, b []float64) []float64 {
	n := len(b)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = refGELU(v + b[i%n])
	}
	return y
}

func biasGELUOp(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
	return nn.BiasGELU(t, in[0], in[1])
}

func TestBiasGELUGradcheck(t *testing.T) {
	for i, shape := range [][]int{{1, 1}, {5, 3}, {2, 3, 7}, {4, 1, 9}} {
		n := shape[len(shape)-1]
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{gradcheck.Randn(uint64(i), 2, shape...), gradcheck.Randn(uint64(i+9), 1, n)},
			Grad:   []bool{true, true},
			Op:     biasGELUOp,
			Ref:    func(in [][]float64) []float64 { return refBiasGELU(in[0], in[1]) },
			Seed:   uint64(i),
		})
		if err != nil {
			t.Errorf("shape %v: %v", shape, err)
		}
	}
}

func TestGELUGradcheck(t *testing.T) {
	for i, shape := range [][]int{{1}, {6, 5}, {2, 3, 3}} {
		x := gradcheck.Randn(uint64(i), 3, shape...)
		// Include the large-|u| tails where tanh saturates.
		x.Data()[0] = 9
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{x},
			Grad:   []bool{true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				return nn.GELU(t, in[0])
			},
			Ref: func(in [][]float64) []float64 {
				y := make([]float64, len(in[0]))
				for k, v := range in[0] {
					y[k] = refGELU(v)
				}
				return y
			},
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("shape %v: %v", shape, err)
		}
	}
}

func TestBiasGELUWorkersAgree(t *testing.T) {
	n := bigRows[2]
	inputs := []*tensor.Tensor{gradcheck.Randn(1, 2, bigRows...), gradcheck.Randn(2, 1, n)}
	req := []bool{true, true}
	ref := func(in [][]float64) []float64 { return refBiasGELU(in[0], in[1]) }
	r3 := checkSampled(t, "bias-GELU, 3 workers", 3, inputs, req, biasGELUOp, ref, 40, 1e-4)
	r1, err := run(1, inputs, req, biasGELUOp, 99)
	if err != nil {
		t.Fatal(err)
	}
	// y and dx are per element: bitwise. db is per-worker partial sums:
	// float32 rounding only.
	numtest.SameBits(t, "y, 1 vs 3 workers", r1.out, r3.out)
	numtest.SameBits(t, "dx, 1 vs 3 workers", r1.grads[0], r3.grads[0])
	closeRel(t, "db, 1 vs 3 workers", r1.grads[1], r3.grads[1], 1e-5)
}

func TestBiasGELUDirectAccumulation(t *testing.T) {
	checkDirectAccumulation(t, directCase{
		name:     "bias-GELU",
		inputs:   []*tensor.Tensor{gradcheck.Randn(1, 1, 3, 2, 5), gradcheck.Randn(2, 1, 5)},
		requires: []bool{true, true},
		params:   []int{1},
		op:       biasGELUOp,
	})
}

func TestBiasGELUShapeError(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	nn.BiasGELU(tape, autograd.Const(tensor.New(2, 5)), autograd.NewLeaf(tensor.New(4), "b", true))
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "bias [4]") {
		t.Fatalf("err = %v", err)
	}
}
