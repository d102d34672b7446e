package autograd

import (
	"fmt"

	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Add returns a + b (equal shapes).
func Add(t *Tape, a, b *Var) *Var { return Apply(t, addFn{}, a, b) }

type addFn struct{}

func (addFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	a, b := in[0], in[1]
	if !tensor.SameShape(a, b) {
		return nil, fmt.Errorf("autograd: Add of shapes %v and %v", a.Shape(), b.Shape())
	}
	y := tensor.Empty(a.Shape()...)
	yd, ad, bd := y.Data(), a.Contiguous().Data(), b.Contiguous().Data()
	kernels.ParallelFor(len(yd), elementWorkers(c.Tape(), len(yd)), func(lo, hi int) {
		kernels.Add(yd[lo:hi], ad[lo:hi], bd[lo:hi])
	})
	return y, nil
}

func (addFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{dy, dy}, nil
}

// minElementWork is the least number of elements worth a goroutine in an
// elementwise loop.
const minElementWork = 1 << 15

// elementWorkers returns how many goroutines an elementwise loop over n
// elements should use on tape t.
func elementWorkers(t *Tape, n int) int { return max(1, min(t.Workers(), n/minElementWork)) }

// Scale returns s·x.
func Scale(t *Tape, x *Var, s float32) *Var { return Apply(t, scaleFn{s}, x) }

type scaleFn struct{ s float32 }

func (f scaleFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	y := in[0].Clone()
	y.Scale(f.s)
	return y, nil
}

func (f scaleFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx := dy.Clone()
	dx.Scale(f.s)
	return []*tensor.Tensor{dx}, nil
}

// View returns x viewed in a new shape (x's value must be contiguous; the
// result shares its storage). The gradient is viewed back.
func View(t *Tape, x *Var, shape ...int) *Var { return Apply(t, viewFn{shape}, x) }

type viewFn struct{ shape []int }

func (f viewFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	if !in[0].IsContiguous() {
		return nil, fmt.Errorf("autograd: View of a non-contiguous %v", in[0].Shape())
	}
	c.State = append([]int(nil), in[0].Shape()...)
	return in[0].View(f.shape...), nil
}

func (f viewFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{dy.Contiguous().View(c.State.([]int)...)}, nil
}

// Narrow returns x[..., start:start+length, ...] along dim as a contiguous
// copy; the gradient is zero outside the window.
func Narrow(t *Tape, x *Var, dim, start, length int) *Var {
	return Apply(t, narrowFn{dim, start, length}, x)
}

type narrowFn struct{ dim, start, length int }

func (f narrowFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0]
	if f.dim < -x.Rank() || f.dim >= x.Rank() || f.start < 0 || f.length < 0 || f.start+f.length > x.Dim(f.dim) {
		return nil, fmt.Errorf("autograd: Narrow(%d, %d, %d) of shape %v", f.dim, f.start, f.length, x.Shape())
	}
	c.State = append([]int(nil), x.Shape()...)
	return x.Narrow(f.dim, f.start, f.length).Clone(), nil
}

func (f narrowFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx := tensor.New(c.State.([]int)...)
	dx.Narrow(f.dim, f.start, f.length).CopyFrom(dy)
	return []*tensor.Tensor{dx}, nil
}

// Cat concatenates along dim; each input's gradient is its slice.
func Cat(t *Tape, dim int, xs ...*Var) *Var { return Apply(t, catFn{dim}, xs...) }

type catFn struct{ dim int }

func (f catFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	sizes := make([]int, len(in))
	for i, x := range in {
		sizes[i] = x.Dim(f.dim)
	}
	c.State = sizes
	return tensor.Cat(f.dim, in...), nil
}

func (f catFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	parts := dy.Split(f.dim, c.State.([]int)...)
	out := make([]*tensor.Tensor, len(parts))
	for i, p := range parts {
		if c.NeedsGrad(i) {
			out[i] = p.Clone()
		}
	}
	return out, nil
}

// Sum returns the sum of all elements of x as a 1-element tensor.
func Sum(t *Tape, x *Var) *Var { return Apply(t, sumFn{}, x) }

type sumFn struct{}

func (sumFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	c.State = append([]int(nil), in[0].Shape()...)
	var s float64
	for _, v := range in[0].Contiguous().Data() {
		s += float64(v)
	}
	return tensor.Scalar(float32(s)), nil
}

func (sumFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{tensor.Full(dy.Data()[0], c.State.([]int)...)}, nil
}

// WeightedSum returns Σ x[i]·w[i] as a 1-element tensor: the masked loss
// reduction, with w = loss_mask / number of tokens. w is a constant.
func WeightedSum(t *Tape, x *Var, w *tensor.Tensor) *Var { return Apply(t, weightedSumFn{w}, x) }

type weightedSumFn struct{ w *tensor.Tensor }

func (f weightedSumFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0]
	if x.Len() != f.w.Len() {
		return nil, fmt.Errorf("autograd: WeightedSum of %v with %d weights", x.Shape(), f.w.Len())
	}
	c.State = append([]int(nil), x.Shape()...)
	var s float64
	w := f.w.Contiguous().Data()
	for i, v := range x.Contiguous().Data() {
		s += float64(v) * float64(w[i])
	}
	return tensor.Scalar(float32(s)), nil
}

func (f weightedSumFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx := f.w.Contiguous().Clone().View(c.State.([]int)...)
	dx.Scale(dy.Data()[0])
	return []*tensor.Tensor{dx}, nil
}
