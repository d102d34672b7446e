package kernels

import (
	"fmt"
	"math"
)

// AdamHyper holds the hyperparameters of one Adam step. Step is the 1-based step count
// including this update (torch's state['step'] after its increment). Decoupled selects
// AdamW's weight decay (Loshchilov and Hutter 2019) instead of Adam's L2 term (Kingma and Ba
// 2015). Where torch derives scalars in Python doubles (1 − β, β^step, lr/bc1, 1 − lr·wd),
// the float32 fields are taken at their decimal values (LR = 1e-3 is the double 1e-3).
type AdamHyper struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int
	Decoupled                          bool
}

// AdamStep applies one update of torch.optim.Adam (Decoupled = false) or torch.optim.AdamW
// (Decoupled = true) to param in place, reading grad and updating the moment estimates
// expAvg (m) and expAvgSq (v); all four slices have the same length. It repeats torch's
// single-tensor CPU step (torch/optim/adam.py and adamw.py, _single_tensor_adam[w]) operation
// by operation, with fma(a, b, c) = a·b + c rounded once, as torch's CPU kernels evaluate
// add(alpha=) and addcmul:
//
//	Adam:   g = fma(wd, param, grad)                   grad.add(param, alpha=wd); grad kept
//	AdamW:  param = param · float32(1 − lr·wd)         param.mul_(1 − lr·wd)
//	m = fma(float32(1−β1), g, m·β1)                    exp_avg.mul_(β1).add_(g, alpha=1−β1)
//	v = fma(float32(1−β2)·g, g, v·β2)                  exp_avg_sq.mul_(β2).addcmul_(g, g, value=1−β2)
//	bc1 = 1 − β1^step, bc2 = 1 − β2^step               float64
//	denom = sqrt(v) / float32(sqrt(bc2)) + eps         (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
//	param = param + (float32(−lr/bc1) · m) / denom     param.addcdiv_(m, denom, value=−lr/bc1)
//
// Every other operation is rounded to float32 in that order (explicit conversions forbid the
// compiler's own fusing), so results are the same on every platform, and they equal
// torch 1.13's bit for bit (testdata/torch_reference.json, several steps of Adam, Adam with
// L2 and AdamW). The float32 fma is computed as a float64 fma rounded to float32, which can
// differ from a true float32 fma only by double rounding in rare exact-tie cases. torch ≥ 2.0
// forms m with lerp_, which can differ in the last bit.
//
// The loop is elementwise: callers may split the slices across goroutines. The four slices
// must not overlap. Panics if the lengths differ or Step < 1 (programmer bugs).
func AdamStep(param, grad, expAvg, expAvgSq []float32, h AdamHyper) {
	const op = "AdamStep"
	needLen(op, "grad", len(grad), len(param), "len(param)")
	needLen(op, "expAvg", len(expAvg), len(param), "len(param)")
	needLen(op, "expAvgSq", len(expAvgSq), len(param), "len(param)")
	if h.Step < 1 {
		panic(fmt.Sprintf("kernels.%s: Step = %d, want ≥ 1 (the 1-based count including this update)", op, h.Step))
	}
	k := adamScalarsOf(h)
	grad, expAvg, expAvgSq = grad[:len(param)], expAvg[:len(param)], expAvgSq[:len(param)]
	if adamSIMD(param, grad, expAvg, expAvgSq, &k) {
		return
	}
	adamGo(param, grad, expAvg, expAvgSq, &k)
}

// adamScalars are the float32 scalars of one Adam step, derived once per call.
type adamScalars struct {
	beta1, omb1, beta2, omb2 float32 // β1, 1 − β1, β2, 1 − β2
	bc2sqrt, negStep         float32 // sqrt(1 − β2^step), −lr/(1 − β1^step)
	eps, wd, decay           float32 // eps, weight decay, 1 − lr·wd
	l2, decouple             bool    // Adam's L2 term; AdamW's decoupled decay (wd ≠ 0)
}

// adamScalarsOf derives one step's scalars from h in float64, from the decimal values of h's
// fields (see [AdamHyper]), each rounded once to float32.
func adamScalarsOf(h AdamHyper) adamScalars {
	lr, b1, b2, wd := widen(h.LR), widen(h.Beta1), widen(h.Beta2), widen(h.WeightDecay)
	bc1 := 1 - math.Pow(b1, float64(h.Step))
	bc2 := 1 - math.Pow(b2, float64(h.Step))
	return adamScalars{
		beta1:    float32(b1),
		omb1:     float32(1 - b1),
		beta2:    float32(b2),
		omb2:     float32(1 - b2),
		bc2sqrt:  float32(math.Sqrt(bc2)),
		negStep:  float32(-(lr / bc1)),
		eps:      h.Eps,
		wd:       h.WeightDecay,
		decay:    float32(1 - lr*wd),
		l2:       !h.Decoupled && h.WeightDecay != 0,
		decouple: h.Decoupled && h.WeightDecay != 0,
	}
}

// adamGo is AdamStep's scalar loop.
func adamGo(param, grad, expAvg, expAvgSq []float32, k *adamScalars) {
	beta1, omb1, beta2, omb2 := k.beta1, k.omb1, k.beta2, k.omb2
	bc2sqrt, negStep, eps, wd32, decay := k.bc2sqrt, k.negStep, k.eps, k.wd, k.decay
	l2, decouple := k.l2, k.decouple
	grad, expAvg, expAvgSq = grad[:len(param)], expAvg[:len(param)], expAvgSq[:len(param)]
	for i, p := range param {
		g := grad[i]
		if l2 {
			g = fmaf(wd32, p, g)
		}
		if decouple {
			p *= decay
		}
		m := fmaf(omb1, g, float32(expAvg[i]*beta1))
		v := fmaf(float32(omb2*g), g, float32(expAvgSq[i]*beta2))
		denom := float32(float32(math.Sqrt(float64(v)))/bc2sqrt) + eps
		expAvg[i], expAvgSq[i] = m, v
		param[i] = p + float32(negStep*m)/denom
	}
}

// fmaf returns a·b + c for float32 operands with one rounding of the exact product-sum to
// float64 and one to float32 (the product of two float32 values is exact in float64).
func fmaf(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
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
