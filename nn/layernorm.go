package nn

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor/kernels"
)

// LayerNorm normalises x [..., h] over its last dimension:
// y = (x − mean)/sqrt(var + eps)·w + b, with the biased variance (as
// torch.nn.LayerNorm). w and b [h] accumulate their gradients directly. It
// is Norm's LayerNorm (NormOptions{Eps: eps}).
//
// Mixed precision: w and b may be bfloat16 or float16; they are widened
// (exactly) and the normalisation runs in float32 on x, with y and dx
// float32. Their gradients are summed in float32 and accumulated by
// AccumulateGrad (one rounding per element into a 16-bit Grad).
func LayerNorm(t *autograd.Tape, x, w, b *autograd.Var, eps float32) *autograd.Var {
	return autograd.Apply(t, normFn{w: w, b: b, o: NormOptions{Eps: eps}}, x, w, b)
}

// addAll returns an AccumulateGrad callback adding the partial sums parts
// into dst in order; a nil part (a worker that had no rows: an input of
// none, say a MoE expert no token was routed to) adds nothing.
func addAll(parts [][]float32) func(dst []float32) {
	return func(dst []float32) {
		for _, p := range parts {
			if p != nil {
				kernels.AddInto(dst, p)
			}
		}
	}
}
