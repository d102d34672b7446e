package optim

import (
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Mixed precision (Megatron's MixedPrecisionOptimizer): a model whose
// parameters are 16-bit keeps float32 main parameters in its segments
// (Segment.Main), updates them, and rounds the result back into the model
// (Adam.Step). An iteration's optimizer step is
//
//	CopyGradsToMain → UnscaleAndCheck (found-inf MAX-reduced by the caller)
//	→ skip, or SumSquares/norm → ScaleGradients (clipping) → Step
//
// where a float32 gradient (grad_reduce_in_fp32, the default for bf16) is
// read in place and a 16-bit one is widened into Segment.MainGrad first.

// CopyGradsToMain widens every 16-bit gradient segment into its float32
// MainGrad (allocated on first use), Megatron's
// _copy_model_grads_to_main_grads. Float32 gradients are left in place.
func (o *Adam) CopyGradsToMain() {
	for i := range o.Segments {
		s := &o.Segments[i]
		g := s.Param.Grad
		if s.GradSrc.Len() > 0 || g == nil || !g.DType().IsHalf() {
			s.MainGrad = nil
			continue
		}
		if len(s.MainGrad) != s.Len {
			s.MainGrad = make([]float32, s.Len)
		}
		tensor.WidenInto(g.DType(), s.MainGrad, g.Bits()[s.Offset:s.Offset+s.Len])
	}
}

// mainGrads returns every segment's main gradient.
func (o *Adam) mainGrads() [][]float32 {
	out := make([][]float32, 0, len(o.Segments))
	for i := range o.Segments {
		if o.Segments[i].HasGrad() {
			out = append(out, o.Segments[i].Grad())
		}
	}
	return out
}

// UnscaleAndCheck multiplies every main gradient by invScale (1/loss
// scale) and reports whether any is NaN or ±Inf on this rank (see the
// package function UnscaleAndCheck for the reduction the caller owes).
func (o *Adam) UnscaleAndCheck(invScale float32) bool {
	return UnscaleAndCheck(o.mainGrads(), invScale)
}

// SumSquares returns Σ g² (in float64) over the main gradients of the
// segments whose parameter owned accepts (nil: every segment), in segment
// order: this rank's part of the global gradient norm.
func (o *Adam) SumSquares(owned func(*nn.Parameter) bool) float64 {
	return o.sumSegments(owned, true, kernels.SumSquares)
}

// SumParamSquares returns Σ p² (in float64) over the main parameters of
// the segments whose parameter owned accepts (nil: every segment), in
// segment order: this rank's part of the parameters' global norm.
func (o *Adam) SumParamSquares(owned func(*nn.Parameter) bool) float64 {
	return o.sumSegments(owned, false, kernels.SumSquares)
}

// CountZeroGrads returns how many main-gradient elements are zero over
// the segments whose parameter owned accepts (nil: every segment): this
// rank's part of the gradients' global count of zeros.
func (o *Adam) CountZeroGrads(owned func(*nn.Parameter) bool) float64 {
	return o.sumSegments(owned, true, func(g []float32) float64 {
		n := 0
		for _, v := range g {
			if v == 0 {
				n++
			}
		}
		return float64(n)
	})
}

// sumSegments sums f over the main gradients (grads) or the main
// parameters of the segments owned accepts (nil: all), in segment order;
// a segment without a gradient counts only for its parameters.
func (o *Adam) sumSegments(owned func(*nn.Parameter) bool, grads bool, f func([]float32) float64) float64 {
	var s float64
	for i := range o.Segments {
		seg := &o.Segments[i]
		switch {
		case owned != nil && !owned(seg.Param):
		case grads && seg.HasGrad():
			s += f(seg.Grad())
		case !grads:
			s += f(seg.Value())
		}
	}
	return s
}

// ClipGradients scales every main gradient by min(1, maxNorm/(norm +
// 1e-6)); maxNorm ≤ 0 disables clipping. It reports whether they were
// scaled.
func (o *Adam) ClipGradients(norm, maxNorm float64) bool {
	if maxNorm <= 0 {
		return false
	}
	c := kernels.ClipScale(norm, maxNorm)
	if c >= 1 {
		return false
	}
	for _, g := range o.mainGrads() {
		kernels.Scale(g, c)
	}
	return true
}
