package tp

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// AllGatherLastDimFromTensorParallelRegion all-gathers x along the last
// dimension over g forward, [..., h/tp] → [..., h], rank r's piece in
// columns [r·h/tp, (r+1)·h/tp); backward reduce-scatters (SUM) the gradient
// along the last dimension, [..., h] → [..., h/tp]:
//
//	y  = cat_last(x₀, …, x_{tp-1})
//	dx_r = (Σ_k dy_k)[..., r·h/tp : (r+1)·h/tp]   (summed in rank order)
//
// Unlike GatherFromTensorModelParallelRegion, whose backward only keeps
// this rank's chunk, the backward here reduces: use it when the ranks'
// gradients of the gathered tensor are partial sums
// (megatron-semantics.md §2.11). It is the identity on a group of one rank
// or a nil group.
func AllGatherLastDimFromTensorParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, allGatherLastDim{g}, x)
}

type allGatherLastDim struct{ g comm.Group }

func (f allGatherLastDim) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return gatherLast(c.Context(), f.g, in[0], "all_gather_last_dim_from_tensor_parallel_region")
}

func (f allGatherLastDim) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := reduceScatterLast(c.Context(), f.g, dy, "all_gather_last_dim_from_tensor_parallel_region backward")
	return []*tensor.Tensor{dx}, err
}

// ReduceScatterLastDimToTensorParallelRegion reduces (SUM) x over g and
// keeps this rank's chunk of the last dimension forward, [..., h] →
// [..., h/tp]; backward all-gathers the gradient along the last dimension,
// [..., h/tp] → [..., h]:
//
//	y_r = (Σ_k x_k)[..., r·h/tp : (r+1)·h/tp]   (summed in rank order)
//	dx  = cat_last(dy₀, …, dy_{tp-1})
//
// h must be divisible by tp; otherwise the tape records an error naming h.
// It is the identity on a group of one rank or a nil group
// (megatron-semantics.md §2.11).
func ReduceScatterLastDimToTensorParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, reduceScatterLastDim{g}, x)
}

type reduceScatterLastDim struct{ g comm.Group }

func (f reduceScatterLastDim) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return reduceScatterLast(c.Context(), f.g, in[0], "reduce_scatter_last_dim_to_tensor_parallel_region")
}

func (f reduceScatterLastDim) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := gatherLast(c.Context(), f.g, dy, "reduce_scatter_last_dim_to_tensor_parallel_region backward")
	return []*tensor.Tensor{dx}, err
}
