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

// DropoutKeyed applies inverted dropout with counter-based masks
// (kernels.DropoutAt): x is rows of its last dimension's width w, and row r's
// elements are the counters c0 … c0+w−1 of the stream key, (key, c0) = at(r).
// A caller that keys each row by its place in the unsharded tensor (the
// sample, the layer, the position) draws the same mask whatever the
// layout, and a recomputation draws it again without any state. p == 0,
// or a tape that is not recording, is the identity.
func DropoutKeyed(t *autograd.Tape, x *autograd.Var, p float32, at func(row int) (key, c0 uint64)) *autograd.Var {
	if p == 0 || !t.Recording() {
		return x
	}
	return autograd.Apply(t, keyedDropoutFn{p: p, at: at}, x)
}

type keyedDropoutFn struct {
	p  float32
	at func(row int) (key, c0 uint64)
}

func (f keyedDropoutFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	y := tensor.Empty(x.Shape()...)
	mask := make([]byte, x.Len())
	w := x.Dim(x.Rank() - 1)
	xs, ys := x.Data(), y.Data()
	rows := x.Len() / max(w, 1)
	// Each row's mask is its own: the rows split over the workers.
	parallelRows(rows, split(c, rows, w), func(_, r0, r1 int) {
		for r := r0; r < r1; r++ {
			key, c0 := f.at(r)
			lo, hi := r*w, (r+1)*w
			kernels.DropoutAt(ys[lo:hi], mask[lo:hi], xs[lo:hi], f.p, key, c0)
		}
	})
	c.State = mask
	return y, nil
}

func (f keyedDropoutFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return dropoutFn{p: f.p}.Backward(c, dy)
}
