package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// MLPActivation is the activation of Megatron's MLP on linear_fc1's output
// x [..., n] and its bias b [n] (nil without a bias), fused:
//
//	u = x + b                                   (rounded to float32)
//	y = act(u)               [..., n]           (gated false)
//	y = act(gate)·up         [..., n/2]         (gated: u = [gate | up], a gated linear unit)
//
// A gated x holds the gate in its first n/2 columns and the up projection
// in the rest, as each tensor-parallel rank's linear_fc1 slice does. The
// tanh GELU with a bias and no gate is BiasGELU itself; the forward saves u
// (or x without a bias) for backward, and b accumulates its gradient
// directly.
func MLPActivation(t *autograd.Tape, x, b *autograd.Var, act kernels.Activation, gated bool) *autograd.Var {
	switch {
	case act == kernels.GELUTanh && !gated && b != nil:
		return BiasGELU(t, x, b)
	case act == kernels.GELUTanh && !gated:
		return GELU(t, x)
	case b == nil:
		return autograd.Apply(t, activationFn{act: act, gated: gated}, x)
	}
	return autograd.Apply(t, activationFn{act: act, gated: gated, b: b}, x, b)
}

type activationFn struct {
	act   kernels.Activation
	gated bool
	b     *autograd.Var
}

func (f activationFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	n := x.Dim(-1)
	if f.gated && n%2 != 0 {
		return nil, fmt.Errorf("nn: gated activation: input %v has an odd last dimension (gate and up must be equal halves)", x.Shape())
	}
	u := x
	if f.b != nil {
		if err := CheckParam(f.b, "bias"); err != nil {
			return nil, err
		}
		if in[1].Len() != n {
			return nil, fmt.Errorf("nn: activation: input %v, bias [%d]", x.Shape(), in[1].Len())
		}
		u = tensor.Empty(x.Shape()...)
		bd, xd, ud := values(in[1]), x.Data(), u.Data()
		rows := x.Len() / n
		parallelRows(rows, split(c, rows, n), func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				kernels.Add(ud[r*n:(r+1)*n], xd[r*n:(r+1)*n], bd)
			}
		})
	}
	out := n
	if f.gated {
		out = n / 2
	}
	shape := append([]int(nil), x.Shape()...)
	shape[len(shape)-1] = out
	y := tensor.Empty(shape...)
	rows := x.Len() / n
	ud, yd := u.Data(), y.Data()
	parallelRows(rows, split(c, rows, n), func(_, lo, hi int) {
		if f.gated {
			kernels.GLUForward(f.act, yd[lo*out:hi*out], ud[lo*n:hi*n], hi-lo, out)
		} else {
			kernels.ActivationForward(f.act, yd[lo*n:hi*n], ud[lo*n:hi*n])
		}
	})
	if c.Recording() {
		c.Save(u)
	}
	return y, nil
}

func (f activationFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	u := c.Saved()[0]
	n := u.Dim(-1)
	rows := u.Len() / n
	out := dy.Dim(-1)
	du := tensor.Empty(u.Shape()...)
	ud, dyd, dud := u.Data(), dy.Data(), du.Data()
	nw := split(c, rows, n)
	part := make([][]float32, nw)
	parallelRows(rows, nw, func(k, lo, hi int) {
		if f.gated {
			kernels.GLUBackward(f.act, dud[lo*n:hi*n], dyd[lo*out:hi*out], ud[lo*n:hi*n], hi-lo, out)
		} else {
			kernels.ActivationBackward(f.act, dud[lo*n:hi*n], dyd[lo*n:hi*n], ud[lo*n:hi*n])
		}
		if f.b != nil {
			part[k] = make([]float32, n)
			for r := lo; r < hi; r++ {
				kernels.AddInto(part[k], dud[r*n:(r+1)*n])
			}
		}
	})
	if f.b == nil {
		return []*tensor.Tensor{du}, nil
	}
	if c.NeedsGrad(1) {
		AccumulateGrad(c, f.b, addAll(part))
	}
	return []*tensor.Tensor{du, nil}, nil
}
