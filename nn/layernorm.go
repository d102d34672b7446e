package nn

import (
	"errors"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// LayerNorm normalises x [..., h] over its last dimension:
// y = (x − mean)/sqrt(var + eps)·w + b, with the biased variance (as
// torch.nn.LayerNorm). w and b [h] accumulate their gradients directly.
//
// Mixed precision: w and b may be bfloat16 or float16; they are widened
// (exactly) and the normalisation runs in float32 on x, with y and dx
// float32. Their gradients are summed in float32 and accumulated by
// AccumulateGrad (one rounding per element into a 16-bit Grad).
func LayerNorm(t *autograd.Tape, x, w, b *autograd.Var, eps float32) *autograd.Var {
	return autograd.Apply(t, layerNormFn{w: w, b: b, eps: eps}, x, w, b)
}

type layerNormFn struct {
	w, b *autograd.Var
	eps  float32
}

type layerNormState struct{ mean, rstd []float32 }

func (f layerNormFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, w, b := in[0].Contiguous(), in[1], in[2]
	if err := errors.Join(CheckParam(f.w, "layer norm weight"), CheckParam(f.b, "layer norm bias")); err != nil {
		return nil, err
	}
	h := w.Len()
	if x.Dim(-1) != h || b.Len() != h {
		return nil, fmt.Errorf("nn: layer norm %q: input %v, weight [%d], bias [%d]", f.w.Name, x.Shape(), h, b.Len())
	}
	rows := x.Len() / h
	y := tensor.New(x.Shape()...)
	st := layerNormState{mean: make([]float32, rows), rstd: make([]float32, rows)}
	xd, yd, wd, bd := x.Data(), y.Data(), values(w), values(b)
	parallelRows(rows, split(c, rows, h), func(_, lo, hi int) {
		kernels.LayerNormForward(yd[lo*h:hi*h], st.mean[lo:hi], st.rstd[lo:hi], xd[lo*h:hi*h], wd, bd, hi-lo, h, f.eps)
	})
	if c.Recording() {
		c.Save(x, w)
		c.State = st
	}
	return y, nil
}

func (f layerNormFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	s := c.Saved()
	x, w := s[0], s[1]
	st := c.State.(layerNormState)
	h := w.Len()
	rows := x.Len() / h
	dx := tensor.New(x.Shape()...)
	nw := split(c, rows, h)
	// Each worker accumulates its rows' dw, db privately; the partial sums are
	// then added in worker order, so the result does not depend on timing.
	pdw := make([][]float32, nw)
	pdb := make([][]float32, nw)
	xd, dyd, dxd, wd := x.Data(), dy.Data(), dx.Data(), values(w)
	parallelRows(rows, nw, func(k, lo, hi int) {
		pdw[k], pdb[k] = make([]float32, h), make([]float32, h)
		kernels.LayerNormBackward(dxd[lo*h:hi*h], pdw[k], pdb[k], dyd[lo*h:hi*h], xd[lo*h:hi*h], st.mean[lo:hi], st.rstd[lo:hi], wd, hi-lo, h)
	})
	// A frozen (or constant) w or b gets no gradient.
	if c.NeedsGrad(1) {
		AccumulateGrad(f.w, addAll(pdw))
	}
	if c.NeedsGrad(2) {
		AccumulateGrad(f.b, addAll(pdb))
	}
	return []*tensor.Tensor{dx, nil, nil}, nil
}

// StateBytes reports the per-row mean and 1/σ LayerNorm keeps for
// backward (autograd's activation-memory accounting).
func (st layerNormState) StateBytes() int64 { return 4 * int64(cap(st.mean)+cap(st.rstd)) }

// addAll returns an AccumulateGrad callback adding the partial sums parts
// into dst in order.
func addAll(parts [][]float32) func(dst []float32) {
	return func(dst []float32) {
		for _, p := range parts {
			kernels.AddInto(dst, p)
		}
	}
}
