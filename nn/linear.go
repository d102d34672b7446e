package nn

import (
	"errors"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// LinearFn computes y = x·Wᵀ (+ b): x [..., in], W [out, in], b [out],
// y [..., out]. Backward: dx = dy·W, dW += dyᵀ·x, db += Σ_rows dy.
//
// The weight and bias gradients are accumulated straight into the
// parameters' Grad tensors (allocated on first use), as Megatron's
// gradient-accumulation fusion writes into main_grad, so no weight-sized
// temporary is made; their hooks run as usual. Apply it with
// Linear.
//
// Mixed precision: when W is bfloat16 or float16, x is rounded to W's type
// once in forward (GemmInput) and that 16-bit copy is both the GEMM's
// operand and what is saved for backward (half the activation memory of a
// float32 x); y is float32 (float32 accumulation), a 16-bit b is widened
// before it is added. In backward dy is rounded to W's type once and used
// for both dx = dy·W and dW = dyᵀ·x; dx is float32. dW and db (the column
// sum of the float32 dy) are accumulated by AccumulateGrad: straight into a
// float32 Grad (the GEMM with beta = 1), or into a 16-bit Grad with one
// rounding per element.
type LinearFn struct {
	W, B *autograd.Var // B may be nil
	// Varying says x's rows change from call to call (a MoE expert's
	// tokens): the GEMMs run through tensor.GemmVarying, which creates no
	// per-shape oneDNN primitive.
	Varying bool
	// UnfusedWeightGrad computes dW into a fresh product added to the
	// gradient afterwards, as Megatron without gradient_accumulation_fusion
	// (AccumulateWeightGrad); the zero value fuses.
	UnfusedWeightGrad bool
}

// gemmFunc is the GEMM of tensor's GemmParallel signature.
type gemmFunc func(workers int, transA, transB bool, alpha float32, a, b *tensor.Tensor, beta float32, c *tensor.Tensor)

// gemm is the layer's GEMM: GemmVarying for varying rows, else GemmParallel.
func (f LinearFn) gemm() gemmFunc {
	if f.Varying {
		return tensor.GemmVarying
	}
	return tensor.GemmParallel
}

// Linear applies x·Wᵀ + b; b may be nil.
func Linear(t *autograd.Tape, x, w, b *autograd.Var) *autograd.Var {
	if b == nil {
		return autograd.Apply(t, LinearFn{W: w}, x, w)
	}
	return autograd.Apply(t, LinearFn{W: w, B: b}, x, w, b)
}

// Forward implements autograd.Function.
func (f LinearFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, w := in[0], in[1]
	if err := errors.Join(CheckParam(f.W, "linear weight"), CheckParam(f.B, "linear bias")); err != nil {
		return nil, err
	}
	out, inF := w.Dim(0), w.Dim(1)
	if x.Dim(-1) != inF {
		return nil, fmt.Errorf("nn: linear %q: input's last dimension is %d, weight is [%d, %d]", f.W.Name, x.Dim(-1), out, inF)
	}
	x = GemmInput(c.Tape().Workers(), x.Contiguous(), w)
	var b *tensor.Tensor
	if f.B != nil {
		b = in[2]
	}
	y := linearForward(f.gemm(), c.Tape().Workers(), x, w, b)
	if c.Recording() {
		c.Save(x, w)
	}
	return y, nil
}

// Backward implements autograd.Function.
func (f LinearFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	s := c.Saved()
	x, w := s[0], s[1]
	out, inF := w.Dim(0), w.Dim(1)
	rows := x.Len() / inF
	workers := c.Tape().Workers()
	var dyg *tensor.Tensor // dy as the GEMMs read it: rounded once for a 16-bit W
	if c.NeedsGrad(0) || c.NeedsGrad(1) {
		dyg = GemmInput(workers, dy.View(rows, out), w)
	}
	grads := make([]*tensor.Tensor, 2, 3)
	if c.NeedsGrad(0) {
		dx := tensor.Empty(x.Shape()...)
		f.gemm()(workers, false, false, 1, dyg, w, 0, dx.View(rows, inF))
		grads[0] = dx
	}
	if c.NeedsGrad(1) {
		AccumulateWeightGrad(c, f.W, !f.UnfusedWeightGrad, func(dst []float32) {
			f.gemm()(workers, true, false, 1, dyg, x.View(rows, inF), 1, tensor.FromSlice(dst, out, inF))
		})
	}
	if f.B != nil {
		grads = append(grads, nil)
		if c.NeedsGrad(2) {
			AccumulateGrad(c, f.B, func(dst []float32) { kernels.ColumnSumInto(dst, dy.Data(), rows, out) })
		}
	}
	return grads, nil
}

// LinearForward returns y = x·Wᵀ + b for a contiguous x [..., in], w
// [out, in] and b [out] (nil: no bias), y [..., out], on workers
// goroutines: the arithmetic of every linear layer (nn.Linear and the
// tensor-parallel linears), so their results agree bit for bit.
//
// y is float32. With a 16-bit w (or x) the GEMM is mixed precision: both
// operands are rounded to that type (a float32 x is rounded here, once, if
// the caller has not rounded it with GemmInput) and the products are
// accumulated in float32. A 16-bit b is widened (exactly) and added as the
// GEMM's initial y, as a float32 b is.
func LinearForward(workers int, x, w, b *tensor.Tensor) *tensor.Tensor {
	return linearForward(tensor.GemmParallel, workers, x, w, b)
}

// linearForward is LinearForward with the GEMM gemm.
func linearForward(gemm gemmFunc, workers int, x, w, b *tensor.Tensor) *tensor.Tensor {
	out, inF := w.Dim(0), w.Dim(1)
	rows := x.Len() / inF
	shape := append(append([]int(nil), x.Shape()[:x.Rank()-1]...), out)
	y := tensor.Empty(shape...)
	beta := float32(0)
	if b != nil {
		bd := values(b)
		yd := y.Data()
		for r := 0; r < rows; r++ {
			copy(yd[r*out:(r+1)*out], bd)
		}
		beta = 1
	}
	gemm(workers, false, true, 1, x.View(rows, inF), w, beta, y.View(rows, out))
	return y
}

// CheckParam verifies that v can receive its gradient directly, as the
// layers that accumulate weight gradients into the parameter need: a leaf
// (a parameter, not the output of another operation, whose gradient would
// otherwise never reach the parameter) whose Grad, if set, is contiguous.
// A nil v passes.
func CheckParam(v *autograd.Var, what string) error {
	if v == nil {
		return nil
	}
	if !v.IsLeaf() {
		return fmt.Errorf("nn: %s %q is the output of another operation; pass the parameter itself (its gradient is accumulated into the parameter directly)", what, v.Name)
	}
	if v.Grad != nil && !v.Grad.IsContiguous() {
		return fmt.Errorf("nn: %s %q has a non-contiguous gradient tensor %v; gradient buffers must be contiguous", what, v.Name, v.Grad.Shape())
	}
	return nil
}

// GradBuffer returns v's gradient tensor, allocating a zero float32 one of
// v's shape on first use (whatever v's dtype), for Functions that
// accumulate into a parameter's gradient directly. Such Functions go
// through AccumulateGrad, which also handles a 16-bit Grad.
func GradBuffer(v *autograd.Var) *tensor.Tensor {
	if v.Grad == nil {
		v.Grad = tensor.New(v.Value.Shape()...)
	}
	return v.Grad
}
