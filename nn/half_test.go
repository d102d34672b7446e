package nn_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// Mixed-precision layers: each layer is run with bfloat16 and float16
// parameter values and compared with the float32 layer whose parameters
// hold the same (rounded) values.

var halfTypes = []tensor.DType{tensor.BFloat16, tensor.Float16}

// layerOp builds a layer on a tape from its activation input x (nil when
// the layer has none) and its parameters.
type layerOp func(t *autograd.Tape, x *autograd.Var, ps []*autograd.Var) *autograd.Var

// layerRun is what runLayer hands back: the last pass's output and input
// gradient, the parameters' gradients after every pass, and the activation
// bytes the tape held after the first forward.
type layerRun struct {
	y, dx *tensor.Tensor
	grads []*tensor.Tensor
	act   int64
}

// runLayer applies op to a float32 leaf x and parameters with values ps
// (Grad preset to grads[i] when grads is not nil) on a tape with the given
// workers, once per output gradient in dys, each followed by Backward.
func runLayer(t *testing.T, workers int, op layerOp, x *tensor.Tensor, ps, grads []*tensor.Tensor, dys ...*tensor.Tensor) layerRun {
	t.Helper()
	tape := autograd.NewTape(context.Background())
	tape.SetWorkers(workers)
	var xv *autograd.Var
	if x != nil {
		xv = autograd.NewLeaf(x.Clone(), "x", true)
	}
	pv := make([]*autograd.Var, len(ps))
	for i, p := range ps {
		pv[i] = nn.NewParameter(fmt.Sprintf("p%d", i), p).Var
		if grads != nil {
			pv[i].Grad = grads[i]
		}
	}
	var r layerRun
	for k, dy := range dys {
		y := op(tape, xv, pv)
		if err := tape.Err(); err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			r.act = tape.ActivationBytes()
		}
		if err := autograd.Backward(tape, y, dy); err != nil {
			t.Fatal(err)
		}
		r.y = y.Value
	}
	if xv != nil {
		r.dx = xv.Grad
	}
	for _, v := range pv {
		r.grads = append(r.grads, v.Grad)
	}
	return r
}

// halves returns the tensors rounded to d, kept in d.
func halves(ts []*tensor.Tensor, d tensor.DType) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ts))
	for i, x := range ts {
		out[i] = tensor.ToHalf(x, d)
	}
	return out
}

// roundedAll returns the tensors rounded to d, as float32 values.
func roundedAll(ts []*tensor.Tensor, d tensor.DType) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ts))
	for i, x := range ts {
		out[i] = numtest.Rounded(x, d)
	}
	return out
}

// zeroGrads returns zero gradients of type d shaped as ts.
func zeroGrads(ts []*tensor.Tensor, d tensor.DType) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ts))
	for i, x := range ts {
		out[i] = tensor.NewOf(d, x.Shape()...)
	}
	return out
}

// gemmTol bounds the relative (norm) difference between a bfloat16 GEMM
// (oneDNN) and the float32 BLAS GEMM of the same rounded operands: the
// products are exact in float32 in both, only the order of the float32
// sums differs.
const gemmTol = 1e-6

// closeOrSame compares bitwise when bitwise is set, else within gemmTol.
func closeOrSame(t *testing.T, what string, got, want *tensor.Tensor, bitwise bool) {
	t.Helper()
	if bitwise || got.DType() != tensor.Float32 {
		numtest.SameTensor(t, what, got, want)
		return
	}
	numtest.CloseNorm(t, what, got.Contiguous().Data(), want.Contiguous().Data(), gemmTol)
}

// A Linear with 16-bit W and b equals the float32 Linear run on the
// explicitly rounded values: x and dy rounded (the GEMM inputs), W and b
// rounded, and the bias gradient the column sum of the unrounded dy.
// float16 GEMMs run as float32 GEMMs on the widened operands, so everything
// is bitwise; bfloat16 GEMMs (oneDNN) agree within gemmTol, the bias
// gradient bitwise. The input is saved in 16 bits (half the activation
// bytes). A 16-bit Grad accumulates two passes as round(round(g1) + g2).
// The large case runs the GEMMs split over 4 workers.
func TestLinearHalfMatchesRoundedFloat32(t *testing.T) {
	sizes := []struct{ rows, in, out, workers int }{{15, 16, 24, 1}, {96, 128, 160, 4}}
	op := func(t *autograd.Tape, x *autograd.Var, ps []*autograd.Var) *autograd.Var {
		return nn.Linear(t, x, ps[0], ps[1])
	}
	for _, sz := range sizes {
		for _, d := range halfTypes {
			t.Run(fmt.Sprintf("%v/%dx%dx%d", d, sz.rows, sz.in, sz.out), func(t *testing.T) {
				x := gradcheck.Randn(1, 1, sz.rows/3, 3, sz.in)
				ps := []*tensor.Tensor{gradcheck.Randn(2, 0.3, sz.out, sz.in), gradcheck.Randn(3, 1, sz.out)}
				dy, dy2 := gradcheck.Randn(4, 1, sz.rows/3, 3, sz.out), gradcheck.Randn(5, 1, sz.rows/3, 3, sz.out)
				bitwise := d == tensor.Float16

				got := runLayer(t, sz.workers, op, x, halves(ps, d), nil, dy)
				ref := runLayer(t, sz.workers, op, numtest.Rounded(x, d), roundedAll(ps, d), nil, numtest.Rounded(dy, d))
				refB := runLayer(t, sz.workers, op, numtest.Rounded(x, d), roundedAll(ps, d), nil, dy)
				closeOrSame(t, "output", got.y, ref.y, bitwise)
				closeOrSame(t, "input grad", got.dx, ref.dx, bitwise)
				closeOrSame(t, "weight grad (float32 Grad)", got.grads[0], ref.grads[0], bitwise)
				numtest.SameTensor(t, "bias grad (float32 Grad)", got.grads[1], refB.grads[1])
				if want := int64(2 * x.Len()); got.act != want || ref.act != 2*want {
					t.Errorf("activation bytes: %d with a %v weight, %d with float32, want %d and %d", got.act, d, ref.act, want, 2*want)
				}

				g2 := runLayer(t, sz.workers, op, x, halves(ps, d), nil, dy2)
				acc := runLayer(t, sz.workers, op, x, halves(ps, d), zeroGrads(ps, d), dy, dy2)
				numtest.SameTensor(t, "16-bit weight grad after two passes", acc.grads[0], numtest.Accumulated(got.grads[0], g2.grads[0], d))
				numtest.SameTensor(t, "16-bit bias grad after two passes", acc.grads[1], numtest.Accumulated(got.grads[1], g2.grads[1], d))
				numtest.SameTensor(t, "input grad with 16-bit parameter grads", acc.dx, sumOf(got.dx, g2.dx))
			})
		}
	}
}

// sumOf returns a + b elementwise (float32).
func sumOf(a, b *tensor.Tensor) *tensor.Tensor {
	s := a.Clone()
	sd, bd := s.Data(), b.Contiguous().Data()
	for i := range sd {
		sd[i] += bd[i]
	}
	return s
}

// LinearForward with a 16-bit weight rounds a float32 input itself: the
// same output as with the input rounded beforehand (GemmInput).
func TestLinearForwardRoundsInput(t *testing.T) {
	x := gradcheck.Randn(1, 1, 6, 8)
	w, b := gradcheck.Randn(2, 0.3, 5, 8), gradcheck.Randn(3, 1, 5)
	for _, d := range halfTypes {
		wh := tensor.ToHalf(w, d)
		if xg := nn.GemmInput(1, x, wh); xg.DType() != d {
			t.Fatalf("GemmInput with a %v weight gives a %v tensor", d, xg.DType())
		}
		if nn.GemmInput(1, x, w) != x {
			t.Fatal("GemmInput with a float32 weight copied its input")
		}
		numtest.SameTensor(t, fmt.Sprintf("%v: float32 input vs rounded input", d),
			nn.LinearForward(2, x, wh, tensor.ToHalf(b, d)), nn.LinearForward(2, nn.GemmInput(1, x, wh), wh, numtest.Rounded(b, d)))
	}
}

// paramCase is a layer whose parameters are used without a GEMM: with
// 16-bit values it computes exactly what the float32 layer computes on the
// rounded values, so everything is bitwise.
type paramCase struct {
	name    string
	x       *tensor.Tensor // nil: no activation input
	params  []*tensor.Tensor
	dyShape []int
	op      layerOp
}

func paramCases() []paramCase {
	ids := []int32{3, 0, 7, 3, 9, 3, 1, 0, 8, 3, 2, 9}
	return []paramCase{
		{"LayerNorm", gradcheck.Randn(1, 1, 4, 3, 40), []*tensor.Tensor{gradcheck.Randn(2, 0.5, 40), gradcheck.Randn(3, 0.5, 40)}, []int{4, 3, 40},
			func(t *autograd.Tape, x *autograd.Var, ps []*autograd.Var) *autograd.Var {
				return nn.LayerNorm(t, x, ps[0], ps[1], 1e-5)
			}},
		{"BiasGELU", gradcheck.Randn(4, 1, 4, 3, 40), []*tensor.Tensor{gradcheck.Randn(5, 0.5, 40)}, []int{4, 3, 40},
			func(t *autograd.Tape, x *autograd.Var, ps []*autograd.Var) *autograd.Var {
				return nn.BiasGELU(t, x, ps[0])
			}},
		{"Embedding", nil, []*tensor.Tensor{gradcheck.Randn(6, 1, 10, 16)}, []int{4, 3, 16},
			func(t *autograd.Tape, _ *autograd.Var, ps []*autograd.Var) *autograd.Var {
				return nn.Embedding(t, ps[0], ids, 4, 3)
			}},
		{"AddPositionsAt", gradcheck.Randn(7, 1, 4, 3, 16), []*tensor.Tensor{gradcheck.Randn(8, 1, 9, 16)}, []int{4, 3, 16},
			func(t *autograd.Tape, x *autograd.Var, ps []*autograd.Var) *autograd.Var {
				return nn.AddPositionsAt(t, x, ps[0], 3)
			}},
	}
}

// Layer norm, bias-GELU, the embedding and position embeddings with 16-bit
// parameters: output, input gradient and float32 parameter gradients are
// bitwise those of the float32 layer on the rounded values; a 16-bit Grad
// holds round(round(g1) + g2) after two passes, bitwise.
func TestParamLayersHalfMatchRoundedFloat32(t *testing.T) {
	for _, c := range paramCases() {
		for _, d := range halfTypes {
			t.Run(fmt.Sprintf("%s/%v", c.name, d), func(t *testing.T) {
				dy, dy2 := gradcheck.Randn(10, 1, c.dyShape...), gradcheck.Randn(11, 1, c.dyShape...)
				got := runLayer(t, 1, c.op, c.x, halves(c.params, d), nil, dy)
				ref := runLayer(t, 1, c.op, c.x, roundedAll(c.params, d), nil, dy)
				numtest.SameTensor(t, "output", got.y, ref.y)
				if c.x != nil {
					numtest.SameTensor(t, "input grad", got.dx, ref.dx)
				}
				ref2 := runLayer(t, 1, c.op, c.x, roundedAll(c.params, d), nil, dy2)
				acc := runLayer(t, 1, c.op, c.x, halves(c.params, d), zeroGrads(c.params, d), dy, dy2)
				for i := range c.params {
					numtest.SameTensor(t, fmt.Sprintf("parameter %d's float32 grad", i), got.grads[i], ref.grads[i])
					numtest.SameTensor(t, fmt.Sprintf("parameter %d's 16-bit grad after two passes", i), acc.grads[i], numtest.Accumulated(ref.grads[i], ref2.grads[i], d))
				}
			})
		}
	}
}

// AccumulateGrad: a nil Grad becomes float32; a float32 Grad is added into
// in place; a 16-bit Grad gets round(Grad + contribution), the contribution
// summed in a zeroed float32 scratch before the one rounding (two halves of
// a bfloat16 ulp make an ulp, where rounding after each would lose both).
func TestAccumulateGrad(t *testing.T) {
	v := nn.NewParameter("w", tensor.ToHalf(tensor.Full(1, 3), tensor.BFloat16)).Var
	nn.AccumulateGrad(nil, v, func(dst []float32) { dst[0] += 2 })
	if v.Grad.DType() != tensor.Float32 || v.Grad.At(0) != 2 || v.Grad.At(1) != 0 {
		t.Fatalf("nil Grad: got %v %v, want float32 [2 0 0]", v.Grad.DType(), v.Grad)
	}
	buf := v.Grad
	nn.AccumulateGrad(nil, v, func(dst []float32) { dst[1] += 3 })
	if v.Grad != buf || v.Grad.At(0) != 2 || v.Grad.At(1) != 3 {
		t.Fatalf("float32 Grad: got %v (same tensor %v), want [2 3 0] in place", v.Grad, v.Grad == buf)
	}
	v.Grad = tensor.ToHalf(tensor.Full(1, 3), tensor.BFloat16)
	const e = 1.0 / 256 // 2^-8: half a bfloat16 ulp at 1
	nn.AccumulateGrad(nil, v, func(dst []float32) {
		for i := range dst {
			if dst[i] != 0 {
				t.Fatalf("the scratch is not zero: %v", dst)
			}
		}
		dst[0] += e       // 1 + 2^-8: a tie, to even: 1
		dst[1] += e       // two halves of an ulp added in float32 first:
		dst[1] += e       // 1 + 2^-7 exactly
		dst[2] += e * 1.5 // above the tie: 1 + 2^-7
	})
	want := []float32{1, 1 + 2*e, 1 + 2*e}
	for i, w := range want {
		if v.Grad.DType() != tensor.BFloat16 || v.Grad.At(i) != w {
			t.Fatalf("bfloat16 Grad: element %d = %v (%v), want %v", i, v.Grad.At(i), v.Grad.DType(), w)
		}
	}
}

// AccumulateWeightGrad: fused, the GEMM adds into the gradient itself;
// unfused, it writes a zeroed product of its own, rounded to the weight's
// 16-bit type before it is added (to a float32 main gradient, or with one
// more rounding to a 16-bit one); a float32 weight's product is added as
// it is.
func TestAccumulateWeightGrad(t *testing.T) {
	const e = 1.0 / 256 // half a bfloat16 ulp at 1
	product := func(dst []float32) {
		for i := range dst {
			if dst[i] != 0 {
				t.Fatalf("the unfused product's buffer is not zero: %v", dst)
			}
			dst[i] = 1 + 1.5*e // rounds to 1 + 2^-7 in bfloat16
		}
	}
	half := func() *autograd.Var {
		return nn.NewParameter("w", tensor.ToHalf(tensor.Full(1, 2), tensor.BFloat16)).Var
	}

	v := half()
	v.Grad = tensor.Full(3, 2)
	nn.AccumulateWeightGrad(nil, v, true, func(dst []float32) {
		if dst[0] != 3 {
			t.Fatalf("fused: the GEMM does not write into the gradient (%v)", dst)
		}
		dst[0] += 1 + 1.5*e
		dst[1] += 1 + 1.5*e
	})
	if g := v.Grad.At(0); g != 3+1+1.5*e {
		t.Errorf("fused: %v, want %v", g, 3+1+1.5*e)
	}

	v = half()
	v.Grad = tensor.Full(3, 2)
	nn.AccumulateWeightGrad(nil, v, false, product)
	if g := v.Grad.At(0); v.Grad.DType() != tensor.Float32 || g != 3+1+2*e {
		t.Errorf("unfused, float32 main gradient: %v, want 3 + round_bf16(1 + 1.5·2^-8) = %v", g, 3+1+2*e)
	}

	v = half()
	v.Grad = tensor.ToHalf(tensor.Full(0, 2), tensor.BFloat16)
	nn.AccumulateWeightGrad(nil, v, false, product)
	if g := v.Grad.At(1); v.Grad.DType() != tensor.BFloat16 || g != 1+2*e {
		t.Errorf("unfused, bfloat16 gradient: %v, want %v", g, 1+2*e)
	}

	w := nn.NewParameter("w", tensor.Full(1, 2)).Var
	nn.AccumulateWeightGrad(nil, w, false, product)
	if g := w.Grad.At(0); g != 1+1.5*e {
		t.Errorf("unfused, float32 weight: %v, want the product unrounded, %v", g, 1+1.5*e)
	}
}
