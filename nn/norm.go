package nn

import (
	"errors"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// NormOptions say which normalisation Norm applies.
type NormOptions struct {
	// RMS selects RMSNorm, x/sqrt(mean(x²) + eps)·γ with no bias;
	// otherwise LayerNorm.
	RMS bool
	// Eps is added to the variance (the mean square for RMSNorm).
	Eps float32
	// ZeroCentered stores the scale as γ − 1: the norm multiplies by
	// 1 + w (Megatron's layernorm_zero_centered_gamma,
	// --apply-layernorm-1p). The sum 1 + w is formed in float32.
	ZeroCentered bool
}

// Norm normalises x [..., h] over its last dimension with weight w [h] and,
// for LayerNorm, bias b [h] (nil for RMSNorm):
//
//	LayerNorm: y = (x − mean)/sqrt(var + eps)·γ + b
//	RMSNorm:   y = x/sqrt(mean(x²) + eps)·γ
//
// with γ = w, or 1 + w when o.ZeroCentered. w and b accumulate their
// gradients directly; 16-bit w and b are widened as LayerNorm's are. Each
// worker sums its rows' dw, db privately and the partial sums are added in
// worker order, so the result does not depend on timing.
func Norm(t *autograd.Tape, x, w, b *autograd.Var, o NormOptions) *autograd.Var {
	f := normFn{w: w, b: b, o: o}
	if o.RMS {
		return autograd.Apply(t, f, x, w)
	}
	return autograd.Apply(t, f, x, w, b)
}

type normFn struct {
	w, b *autograd.Var
	o    NormOptions
}

type normState struct{ mean, rstd []float32 }

// gamma returns the scale γ as float32 values: w, or 1 + w.
func (f normFn) gamma(w *tensor.Tensor) []float32 { return gammaOf(w, f.o.ZeroCentered) }

func (f normFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, w := in[0].Contiguous(), in[1]
	err := CheckParam(f.w, "layer norm weight")
	if !f.o.RMS {
		err = errors.Join(err, CheckParam(f.b, "layer norm bias"))
	}
	if err != nil {
		return nil, err
	}
	h := w.Len()
	if x.Dim(-1) != h || !f.o.RMS && in[2].Len() != h {
		return nil, fmt.Errorf("nn: layer norm %q: input %v, weight [%d]", f.w.Name, x.Shape(), h)
	}
	rows := x.Len() / h
	y := tensor.Empty(x.Shape()...)
	st := normState{rstd: make([]float32, rows)}
	xd, yd, g := x.Data(), y.Data(), f.gamma(w)
	if f.o.RMS {
		parallelRows(rows, split(c, rows, h), func(_, lo, hi int) {
			kernels.RMSNormForward(yd[lo*h:hi*h], st.rstd[lo:hi], xd[lo*h:hi*h], g, hi-lo, h, f.o.Eps)
		})
	} else {
		st.mean = make([]float32, rows)
		bd := values(in[2])
		parallelRows(rows, split(c, rows, h), func(_, lo, hi int) {
			kernels.LayerNormForward(yd[lo*h:hi*h], st.mean[lo:hi], st.rstd[lo:hi], xd[lo*h:hi*h], g, bd, hi-lo, h, f.o.Eps)
		})
	}
	if c.Recording() {
		c.Save(x, w)
		c.State = st
	}
	return y, nil
}

func (f normFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	s := c.Saved()
	x, w := s[0], s[1]
	st := c.State.(normState)
	h := w.Len()
	rows := x.Len() / h
	dx := tensor.Empty(x.Shape()...)
	nw := split(c, rows, h)
	pdw, pdb := make([][]float32, nw), make([][]float32, nw)
	xd, dyd, dxd, g := x.Data(), dy.Data(), dx.Data(), f.gamma(w)
	parallelRows(rows, nw, func(k, lo, hi int) {
		pdw[k] = make([]float32, h)
		if f.o.RMS {
			kernels.RMSNormBackward(dxd[lo*h:hi*h], pdw[k], dyd[lo*h:hi*h], xd[lo*h:hi*h], st.rstd[lo:hi], g, hi-lo, h)
			return
		}
		pdb[k] = make([]float32, h)
		kernels.LayerNormBackward(dxd[lo*h:hi*h], pdw[k], pdb[k], dyd[lo*h:hi*h], xd[lo*h:hi*h], st.mean[lo:hi], st.rstd[lo:hi], g, hi-lo, h)
	})
	if c.NeedsGrad(1) {
		AccumulateGrad(c, f.w, addAll(pdw))
	}
	if f.o.RMS {
		return []*tensor.Tensor{dx, nil}, nil
	}
	if c.NeedsGrad(2) {
		AccumulateGrad(c, f.b, addAll(pdb))
	}
	return []*tensor.Tensor{dx, nil, nil}, nil
}

// StateBytes is the memory the saved row statistics (mean and 1/σ, or 1/rms)
// hold, for autograd's activation-memory accounting.
func (st normState) StateBytes() int64 { return 4 * int64(cap(st.mean)+cap(st.rstd)) }
