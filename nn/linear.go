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
type LinearFn struct {
	W, B *autograd.Var // B may be nil
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
	x = x.Contiguous()
	var b *tensor.Tensor
	if f.B != nil {
		b = in[2]
	}
	y := LinearForward(c.Tape().Workers(), x, w, b)
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
	dy2 := dy.View(rows, out)
	grads := make([]*tensor.Tensor, 2, 3)
	if c.NeedsGrad(0) {
		dx := tensor.New(x.Shape()...)
		tensor.GemmParallel(c.Tape().Workers(), false, false, 1, dy2, w, 0, dx.View(rows, inF))
		grads[0] = dx
	}
	if c.NeedsGrad(1) {
		tensor.GemmParallel(c.Tape().Workers(), true, false, 1, dy2, x.View(rows, inF), 1, GradBuffer(f.W))
	}
	if f.B != nil {
		grads = append(grads, nil)
		if c.NeedsGrad(2) {
			kernels.ColumnSumInto(GradBuffer(f.B).Data(), dy.Data(), rows, out)
		}
	}
	return grads, nil
}

// LinearForward returns y = x·Wᵀ + b for a contiguous x [..., in], w
// [out, in] and b [out] (nil: no bias), y [..., out], on workers
// goroutines: the arithmetic of every linear layer (nn.Linear and the
// tensor-parallel linears), so their results agree bit for bit.
func LinearForward(workers int, x, w, b *tensor.Tensor) *tensor.Tensor {
	out, inF := w.Dim(0), w.Dim(1)
	rows := x.Len() / inF
	shape := append(append([]int(nil), x.Shape()[:x.Rank()-1]...), out)
	y := tensor.New(shape...)
	beta := float32(0)
	if b != nil {
		bd := b.Contiguous().Data()
		yd := y.Data()
		for r := 0; r < rows; r++ {
			copy(yd[r*out:(r+1)*out], bd)
		}
		beta = 1
	}
	tensor.GemmParallel(workers, false, true, 1, x.View(rows, inF), w, beta, y.View(rows, out))
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

// GradBuffer returns v's gradient tensor, allocating a zero one on first
// use, for Functions that accumulate into a parameter's gradient directly.
func GradBuffer(v *autograd.Var) *tensor.Tensor {
	if v.Grad == nil {
		v.Grad = tensor.New(v.Value.Shape()...)
	}
	return v.Grad
}
