package optim

import (
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/kernels"
)

// SumSquares returns Σ g² over the gradients of params (in float64), the
// local part of the global gradient norm. A data-parallel or model-parallel
// caller all-reduces it over the ranks that hold disjoint gradients before
// taking the square root.
func SumSquares(params []*nn.Parameter) float64 {
	var s float64
	for _, p := range params {
		if p.Grad != nil {
			s += kernels.SumSquares(p.Grad.Data())
		}
	}
	return s
}

// ClipGradients scales every gradient by min(1, maxNorm/(norm + 1e-6)), as
// torch.nn.utils.clip_grad_norm_ and Megatron's clip_grad_norm_fp32 do,
// where norm is the global L2 norm of the gradients. maxNorm ≤ 0 disables
// clipping. It returns whether the gradients were scaled.
func ClipGradients(params []*nn.Parameter, norm, maxNorm float64) bool {
	if maxNorm <= 0 {
		return false
	}
	c := kernels.ClipScale(norm, maxNorm)
	if c >= 1 {
		return false
	}
	for _, p := range params {
		if p.Grad != nil {
			kernels.Scale(p.Grad.Data(), c)
		}
	}
	return true
}
