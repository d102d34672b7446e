package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// BiasGELU returns gelu(x + b) for x [..., n] and b [n], with the tanh
// approximation gelu(u) = ½u(1 + tanh(√(2/π)(u + 0.044715u³))): the fused
// bias-GELU of Megatron's MLP (linear_fc1 is then applied without its bias).
// b accumulates its gradient directly (AccumulateGrad). A bfloat16 or
// float16 b is widened (exactly); x, y and the arithmetic are float32.
func BiasGELU(t *autograd.Tape, x, b *autograd.Var) *autograd.Var {
	return autograd.Apply(t, biasGELUFn{b: b}, x, b)
}

type biasGELUFn struct{ b *autograd.Var }

func (f biasGELUFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, b := in[0].Contiguous(), in[1]
	if err := CheckParam(f.b, "bias"); err != nil {
		return nil, err
	}
	n := b.Len()
	if x.Dim(-1) != n {
		return nil, fmt.Errorf("nn: bias-GELU: input %v, bias [%d]", x.Shape(), n)
	}
	rows := x.Len() / n
	y := tensor.Empty(x.Shape()...)
	xd, yd, bd := x.Data(), y.Data(), values(b)
	parallelRows(rows, split(c, rows, n), func(_, lo, hi int) {
		kernels.BiasGeluForward(yd[lo*n:hi*n], xd[lo*n:hi*n], bd, hi-lo, n)
	})
	if c.Recording() {
		c.Save(x, b)
	}
	return y, nil
}

func (f biasGELUFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	s := c.Saved()
	x, b := s[0], s[1]
	n := b.Len()
	rows := x.Len() / n
	dx := tensor.Empty(x.Shape()...)
	nw := split(c, rows, n)
	part := make([][]float32, nw)
	xd, dyd, dxd, bd := x.Data(), dy.Data(), dx.Data(), values(b)
	parallelRows(rows, nw, func(k, lo, hi int) {
		part[k] = make([]float32, n)
		kernels.BiasGeluBackward(dxd[lo*n:hi*n], part[k], dyd[lo*n:hi*n], xd[lo*n:hi*n], bd, hi-lo, n)
	})
	if c.NeedsGrad(1) { // a frozen (or constant) bias gets no gradient
		AccumulateGrad(c, f.b, addAll(part))
	}
	return []*tensor.Tensor{dx, nil}, nil
}

// GELU returns gelu(x) (tanh approximation) elementwise.
func GELU(t *autograd.Tape, x *autograd.Var) *autograd.Var { return autograd.Apply(t, geluFn{}, x) }

type geluFn struct{}

func (geluFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	y := tensor.Empty(x.Shape()...)
	kernels.GeluForward(y.Data(), x.Data())
	if c.Recording() {
		c.Save(x)
	}
	return y, nil
}

func (geluFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	dx := tensor.Empty(x.Shape()...)
	kernels.GeluBackward(dx.Data(), dy.Data(), x.Data())
	return []*tensor.Tensor{dx}, nil
}
