package kernels

import "math"

// SGDHyper are one step of torch.optim.SGD (dampening 0, not Nesterov):
// the learning rate, the momentum (0: none) and the weight decay, added
// to the gradient (coupled, as torch's SGD does).
type SGDHyper struct {
	LR, Momentum, WeightDecay float32
}

// SGDStep applies one torch.optim.SGD step to the parameters p with
// gradient g, in torch's float32 order (ATen's add with alpha is a fused
// multiply-add, fma32 here):
//
//	d = fma(wd, p, g)
//	buf = μ·buf + d;  d = buf      (with momentum)
//	p = fma(−lr, d, p)
//
// buf is the momentum buffer (len(p), zero before the first step, where
// torch sets buf = d: the same values); nil without momentum.
func SGDStep(p, g, buf []float32, h SGDHyper) {
	_ = g[len(p)-1]
	for i, x := range p {
		d := g[i]
		if h.WeightDecay != 0 {
			d = fma32(h.WeightDecay, x, d)
		}
		if h.Momentum != 0 {
			d = h.Momentum*buf[i] + d
			buf[i] = d
		}
		p[i] = fma32(-h.LR, d, x)
	}
}

// fma32 is a·b + c rounded once to float32: the float64 product of two
// float32s is exact, and the float64 sum rounds to float32 as a float32
// fused multiply-add does except where the sum needs more than 53 bits
// and lands halfway after the first rounding (not seen in the torch
// fixture).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}
