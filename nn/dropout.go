package nn

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
)

// Dropout applies inverted dropout with drop probability p: each element is
// kept with probability 1−p and scaled by 1/(1−p). The mask comes from g (the
// rank's generator, or a forked tracker state), drawn in element order.
// p == 0, or a tape that is not recording (evaluation), is the identity.
func Dropout(t *autograd.Tape, x *autograd.Var, p float32, g *rng.RNG) *autograd.Var {
	if p == 0 || !t.Recording() {
		return x
	}
	return autograd.Apply(t, dropoutFn{p: p, g: g}, x)
}

type dropoutFn struct {
	p float32
	g *rng.RNG
}

func (f dropoutFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	y := tensor.Empty(x.Shape()...)
	mask := make([]byte, x.Len())
	kernels.Dropout(y.Data(), mask, x.Data(), f.p, f.g)
	c.State = mask
	return y, nil
}

func (f dropoutFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx := tensor.Empty(dy.Shape()...)
	kernels.DropoutBackward(dx.Data(), dy.Data(), c.State.([]byte), f.p)
	return []*tensor.Tensor{dx}, nil
}
