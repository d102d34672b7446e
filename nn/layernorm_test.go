package nn_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// refLayerNorm is torch.nn.LayerNorm over the last dimension h with the
// biased variance: y = (x − mean)/sqrt(var + eps)·w + b.
func refLayerNorm(x, w, b []float64, h int, eps float64) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < len(x)/h; r++ {
		row := x[r*h : (r+1)*h]
		var mean float64
		for _, v := range row {
			mean += v
		}
		mean /= float64(h)
		var vr float64
		for _, v := range row {
			vr += (v - mean) * (v - mean)
		}
		vr /= float64(h)
		inv := 1 / math.Sqrt(vr+eps)
		for j, v := range row {
			y[r*h+j] = (v-mean)*inv*w[j] + b[j]
		}
	}
	return y
}

func layerNormOp(eps float32) opFunc {
	return func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
		return nn.LayerNorm(t, in[0], in[1], in[2], eps)
	}
}

func TestLayerNormGradcheck(t *testing.T) {
	for i, shape := range [][]int{{4, 7}, {2, 3, 5}, {3, 1}, {1, 1, 16}} {
		h := shape[len(shape)-1]
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{
				gradcheck.Randn(uint64(i), 1, shape...),
				gradcheck.Randn(uint64(i+10), 1, h),
				gradcheck.Randn(uint64(i+20), 1, h),
			},
			Grad: []bool{true, true, true},
			Op:   layerNormOp(1e-5),
			Ref:  func(in [][]float64) []float64 { return refLayerNorm(in[0], in[1], in[2], h, 1e-5) },
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("shape %v: %v", shape, err)
		}
	}
}

// bigRows is a [13, 5, 769] activation: 65 rows of 769, enough work for
// nn's row split to use 3 workers, with uneven chunks of 21, 22, 22 rows.
var bigRows = []int{13, 5, 769}

func TestLayerNormWorkersAgree(t *testing.T) {
	h := bigRows[2]
	inputs := []*tensor.Tensor{
		gradcheck.Randn(1, 2, bigRows...),
		gradcheck.Randn(2, 1, h),
		gradcheck.Randn(3, 1, h),
	}
	req := []bool{true, true, true}
	ref := func(in [][]float64) []float64 { return refLayerNorm(in[0], in[1], in[2], h, 1e-5) }
	r3 := checkSampled(t, "layer norm, 3 workers", 3, inputs, req, layerNormOp(1e-5), ref, 40, 1e-4)
	r1, err := run(1, inputs, req, layerNormOp(1e-5), 99)
	if err != nil {
		t.Fatal(err)
	}
	// Each row's output and input gradient are the same arithmetic whatever
	// the worker count: bitwise. dw and db are per-worker partial sums added
	// in worker order, a different rounding order from one worker's: they
	// agree to float32 rounding only.
	numtest.SameBits(t, "y, 1 vs 3 workers", r1.out, r3.out)
	numtest.SameBits(t, "dx, 1 vs 3 workers", r1.grads[0], r3.grads[0])
	closeRel(t, "dw, 1 vs 3 workers", r1.grads[1], r3.grads[1], 1e-5)
	closeRel(t, "db, 1 vs 3 workers", r1.grads[2], r3.grads[2], 1e-5)
}

func TestLayerNormDirectAccumulation(t *testing.T) {
	checkDirectAccumulation(t, directCase{
		name: "layer norm",
		inputs: []*tensor.Tensor{
			gradcheck.Randn(1, 1, 3, 2, 6), gradcheck.Randn(2, 1, 6), gradcheck.Randn(3, 1, 6),
		},
		requires: []bool{true, true, true},
		params:   []int{1, 2},
		op:       layerNormOp(1e-5),
	})
}

func TestLayerNormShapeError(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	w := autograd.NewLeaf(tensor.New(4), "final_layernorm.weight", true)
	b := autograd.NewLeaf(tensor.New(4), "final_layernorm.bias", true)
	nn.LayerNorm(tape, autograd.Const(tensor.New(2, 5)), w, b, 1e-5)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "final_layernorm.weight") {
		t.Fatalf("err = %v", err)
	}
}

// TestFrozenParametersGetNoGradient: a parameter that does not require a
// gradient (frozen, or a constant) must not have one allocated or
// accumulated by the Functions that accumulate directly, even when the
// activation flowing through them does require one.
func TestFrozenParametersGetNoGradient(t *testing.T) {
	x := gradcheck.Randn(1, 1, 3, 2, 4)
	cases := []struct {
		name   string
		inputs []*tensor.Tensor
		op     opFunc
	}{
		{"layer norm", []*tensor.Tensor{x, gradcheck.Randn(2, 1, 4), gradcheck.Randn(3, 1, 4)}, layerNormOp(1e-5)},
		{"bias-GELU", []*tensor.Tensor{x, gradcheck.Randn(2, 1, 4)}, func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.BiasGELU(t, in[0], in[1])
		}},
		{"linear", []*tensor.Tensor{x, gradcheck.Randn(2, 1, 5, 4), gradcheck.Randn(3, 1, 5)}, func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.Linear(t, in[0], in[1], in[2])
		}},
		{"position embedding", []*tensor.Tensor{x, gradcheck.Randn(2, 1, 5, 4)}, func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AddPositionsAt(t, in[0], in[1], 0)
		}},
	}
	for _, c := range cases {
		req := make([]bool, len(c.inputs))
		req[0] = true
		frozen, err := run(1, c.inputs, req, c.op, 4)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := 1; i < len(req); i++ {
			if frozen.grads[i] != nil {
				t.Errorf("%s: frozen parameter %d received a gradient", c.name, i)
			}
		}
		for i := range req {
			req[i] = true
		}
		all, err := run(1, c.inputs, req, c.op, 4)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		numtest.SameBits(t, fmt.Sprintf("%s: dx with frozen parameters", c.name), frozen.grads[0], all.grads[0])
	}
}
