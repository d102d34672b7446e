package nn_test

import (
	"context"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/dnnl"
)

// TestAttentionHalfPrecision: the attention core with its GEMMs in
// bfloat16 and float16 (Q, K, V, P, dO and dS rounded, float32
// accumulation and softmax) stays within the type's rounding of the
// float64 reference — and measurably off the float32 result, so the
// rounding happens — its output and input gradient are the same bits on 1
// and 3 workers, and it keeps half the bytes of float32 for backward.
func TestAttentionHalfPrecision(t *testing.T) {
	x := gradcheck.Randn(5, 1, bigAttn.qkv()...)
	ref := func(in [][]float64) []float64 { return refAttention(in[0], bigAttn, nil, 0) }
	op := func(d tensor.DType) opFunc {
		return func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.CausalAttentionIn(d, t, in[0], bigAttn.n, 0, nil)
		}
	}
	f32, err := run(1, []*tensor.Tensor{x}, []bool{true}, op(tensor.Float32), 9)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d        tensor.DType
		tol, off float64 // within tol of the reference, at least off from float32
	}{{tensor.BFloat16, 3e-2, 1e-4}, {tensor.Float16, 4e-3, 1e-5}} {
		r := checkSampled(t, c.d.String()+" attention", 3, []*tensor.Tensor{x}, []bool{true}, op(c.d), ref, 30, c.tol)
		r1, err := run(1, []*tensor.Tensor{x}, []bool{true}, op(c.d), 99)
		if err != nil {
			t.Fatal(err)
		}
		numtest.SameBits(t, c.d.String()+": output, 1 vs 3 workers", r1.out, r.out)
		numtest.SameBits(t, c.d.String()+": dqkv, 1 vs 3 workers", r1.grads[0], r.grads[0])
		if e, _ := relErr(r1.out, to64(f32.out)); e < c.off {
			t.Errorf("%v output within %.2g of float32's: the operands are not rounded", c.d, e)
		}
	}
	// Saved for backward: bfloat16 Q, K, V (2 bytes each) against float32's 4.
	saved := func(d tensor.DType) int64 {
		tape := autograd.NewTape(context.Background())
		v := autograd.NewLeaf(x.Clone(), "qkv", true)
		before := tape.ActivationBytes()
		nn.CausalAttentionIn(d, tape, v, bigAttn.n, 0, nil)
		return tape.ActivationBytes() - before
	}
	if b16, b32 := saved(tensor.BFloat16), saved(tensor.Float32); 2*(b16-lse()) != b32-lse() {
		t.Errorf("bfloat16 attention keeps %d bytes, float32 %d: want the qkv half as large (log-sum-exp %d bytes each)", b16, b32, lse())
	}
}

// TestAttentionBF16Paths: a bfloat16 attention whose GEMMs run on widened
// float32 values (the plan on a CPU where oneDNN's bfloat16 kernel is the
// slower) gives the native path's numbers to float32 summation order —
// the same rounded operands — keeps the same bytes for backward, and
// stays off float32's result.
func TestAttentionBF16Paths(t *testing.T) {
	if !dnnl.Available() {
		t.Skip("no native bfloat16 GEMM on this CPU or build: " + dnnl.Version())
	}
	x := gradcheck.Randn(6, 1, bigAttn.qkv()...)
	op := func(widen bool) opFunc {
		return func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AttentionPath(t, in[0], bigAttn.n, nn.AttentionOptions{DType: tensor.BFloat16}, widen)
		}
	}
	native, err := run(2, []*tensor.Tensor{x}, []bool{true}, op(false), 9)
	if err != nil {
		t.Fatal(err)
	}
	wide, err := run(2, []*tensor.Tensor{x}, []bool{true}, op(true), 9)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := relErr(wide.out, to64(native.out)); !(e < 1e-5) {
		t.Errorf("widened output %.2g from native's, want < 1e-5", e)
	}
	if e, _ := relErr(wide.grads[0], to64(native.grads[0])); !(e < 1e-5) {
		t.Errorf("widened dqkv %.2g from native's, want < 1e-5", e)
	}
	f32, err := run(2, []*tensor.Tensor{x}, []bool{true}, func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
		return nn.CausalAttentionIn(tensor.Float32, t, in[0], bigAttn.n, 0, nil)
	}, 9)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := relErr(wide.out, to64(f32.out)); e < 1e-4 {
		t.Errorf("widened output within %.2g of float32's: the operands are not rounded", e)
	}
	saved := func(widen bool) int64 {
		tape := autograd.NewTape(context.Background())
		v := autograd.NewLeaf(x.Clone(), "qkv", true)
		before := tape.ActivationBytes()
		nn.AttentionPath(tape, v, bigAttn.n, nn.AttentionOptions{DType: tensor.BFloat16}, widen)
		return tape.ActivationBytes() - before
	}
	if w, n := saved(true), saved(false); w != n {
		t.Errorf("widened attention keeps %d bytes for backward, native %d", w, n)
	}
}

// lse is the log-sum-exp state attention keeps for bigAttn, in bytes.
func lse() int64 { return 4 * int64(bigAttn.b*bigAttn.n*bigAttn.s) }
