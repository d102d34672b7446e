package kernels

import (
	"fmt"
	"math"
)

// AdamHyper holds the hyperparameters of one Adam step. Step is the 1-based step count after
// this update (torch's state['step']). Decoupled selects AdamW's weight decay (Loshchilov and
// Hutter 2019) instead of Adam's L2 term (Kingma and Ba 2015). The float32 fields are taken
// at their decimal values (LR = 1e-3 is the double 1e-3) when derived scalars are computed in
// float64, as Python computes them.
type AdamHyper struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int
	Decoupled                          bool
}

// AdamStep applies one update of torch.optim.Adam (Decoupled = false) or torch.optim.AdamW
// (Decoupled = true) to param in place, reading grad and updating the moment estimates
// expAvg (m) and expAvgSq (v), all of the same length. It follows torch's single-tensor CPU
// implementation (torch/optim/adam.py, _single_tensor_adam) operation by operation:
//
//	Adam:   g = grad + wd·param                        (grad itself is not modified)
//	AdamW:  param = param · float32(1 − lr·wd)          (the factor computed in float64)
//	m = m + w·(g − m),  w = float32(1−β1)               (torch's lerp for w < 0.5;
//	                                                     m = g − (g − m)·(1−w) otherwise)
//	v = v·β2 + ((1−β2)·g)·g                             (mul_, addcmul_)
//	bc1 = 1 − β1^step, bc2 = 1 − β2^step                (float64)
//	denom = sqrt(v) / float32(sqrt(bc2)) + eps
//	param = param + (float32(−lr/bc1)·m) / denom        (addcdiv_)
//
// Every operation is rounded to float32 in that order (explicit conversions forbid fused
// multiply-adds), so on a given platform the result is reproducible bit for bit; torch's
// vectorized kernels may fuse some of these, which differs in the last bit at most per
// operation. The loop is elementwise: callers may split the slices across goroutines.
//
// Panics if the lengths differ or Step < 1 (programmer bugs).
func AdamStep(param, grad, expAvg, expAvgSq []float32, h AdamHyper) {
	const op = "AdamStep"
	needLen(op, "grad", len(grad), len(param), "len(param)")
	needLen(op, "expAvg", len(expAvg), len(param), "len(param)")
	needLen(op, "expAvgSq", len(expAvgSq), len(param), "len(param)")
	if h.Step < 1 {
		panic(fmt.Sprintf("kernels.%s: Step = %d, want ≥ 1 (the 1-based count including this update)", op, h.Step))
	}
	lr, b1, b2, wd := widen(h.LR), widen(h.Beta1), widen(h.Beta2), widen(h.WeightDecay)
	bc1 := 1 - math.Pow(b1, float64(h.Step))
	bc2 := 1 - math.Pow(b2, float64(h.Step))
	var (
		w1       = float32(1 - b1) // lerp weight
		omw1     = 1 - w1          // float32, as torch's lerp forms it
		small    = w1 < 0.5
		beta2    = float32(b2)
		omb2     = float32(1 - b2)
		bc2sqrt  = float32(math.Sqrt(bc2))
		negStep  = float32(-(lr / bc1))
		eps      = h.Eps
		wd32     = h.WeightDecay
		decay    = float32(1 - lr*wd)
		l2       = !h.Decoupled && h.WeightDecay != 0
		decouple = h.Decoupled && h.WeightDecay != 0
	)
	grad, expAvg, expAvgSq = grad[:len(param)], expAvg[:len(param)], expAvgSq[:len(param)]
	for i, p := range param {
		g := grad[i]
		if l2 {
			g += float32(wd32 * p)
		}
		if decouple {
			p *= decay
		}
		m := expAvg[i]
		if small {
			m += float32(w1 * (g - m))
		} else {
			m = g - float32((g-m)*omw1)
		}
		v := float32(expAvgSq[i]*beta2) + float32(float32(omb2*g)*g)
		denom := float32(float32(math.Sqrt(float64(v)))/bc2sqrt) + eps
		expAvg[i], expAvgSq[i] = m, v
		param[i] = p + float32(negStep*m)/denom
	}
}

// ClipScale returns the factor by which gradients are multiplied when clipping to maxNorm,
// as torch.nn.utils.clip_grad_norm_: min(1, maxNorm/(totalNorm + 1e-6)), rounded to float32.
// A NaN totalNorm gives NaN (torch's clamp passes NaN through; the caller decides whether a
// non-finite norm skips the step).
func ClipScale(totalNorm, maxNorm float64) float32 {
	c := maxNorm / (totalNorm + 1e-6)
	if c > 1 {
		c = 1
	}
	return float32(c)
}
