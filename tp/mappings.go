package tp

import (
	"context"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// Each mapping is a forward/backward pair of tensor collectives
// (docs/SEMANTICS.md § Tensor-parallel mappings); every one is the identity,
// forward and backward, on a group of one rank or a nil group.

// step is one direction of a mapping: a collective (or a split) of a
// tensor over the rank's group.
type step func(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error)

// mapping is the autograd Function of a forward/backward pair.
type mapping struct{ fwd, bwd step }

func (f mapping) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return f.fwd(c.Context(), in[0])
}

func (f mapping) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := f.bwd(c.Context(), dy)
	return []*tensor.Tensor{dx}, err
}

// applyMapping records the pair on t, or returns x when g has one rank.
func applyMapping(t *autograd.Tape, x *autograd.Var, g comm.Group, fwd, bwd step) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, mapping{fwd, bwd}, x)
}

// The steps, each naming its mapping in errors.

func identity(_ context.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return x, nil }

func sumStep(g comm.Group, what string) step {
	return func(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return allReduce(ctx, g, x, comm.Sum, what)
	}
}

func splitFirstStep(g comm.Group, what string) step {
	return func(_ context.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return splitFirst(g, x, what) }
}

func splitLastStep(g comm.Group, what string) step {
	return func(_ context.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return splitLast(g, x, what) }
}

func gatherFirstStep(g comm.Group, sizes []int, what string) step {
	return func(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		if sizes != nil {
			return gatherFirstV(ctx, g, x, sizes, what)
		}
		return gatherFirst(ctx, g, x, what)
	}
}

func gatherLastStep(g comm.Group, what string) step {
	return func(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return gatherLast(ctx, g, x, what)
	}
}

func reduceScatterFirstStep(g comm.Group, sizes []int, what string) step {
	return func(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		if sizes != nil {
			return reduceScatterFirstV(ctx, g, x, sizes, what)
		}
		return reduceScatterFirst(ctx, g, x, what)
	}
}

func reduceScatterLastStep(g comm.Group, what string) step {
	return func(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return reduceScatterLast(ctx, g, x, what)
	}
}

// keepFirstStep keeps this rank's piece of dim 0 when the pieces have the
// given sizes.
func keepFirstStep(g comm.Group, sizes []int) step {
	return func(_ context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		off := 0
		for r := 0; r < rankOf(g); r++ {
			off += sizes[r]
		}
		return x.Narrow(0, off, sizes[rankOf(g)]).Contiguous(), nil
	}
}

// CopyToTensorModelParallelRegion is the identity forward and an all-reduce
// (SUM) of the gradient over g backward: the entry to a tensor-parallel
// region whose ranks each use the whole input.
func CopyToTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	return applyMapping(t, x, g, identity, sumStep(g, "copy_to_tensor_model_parallel_region backward"))
}

// ReduceFromTensorModelParallelRegion all-reduces (SUM) x over g forward;
// the gradient passes through unchanged: the exit of a tensor-parallel
// region whose ranks hold partial sums.
func ReduceFromTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	return applyMapping(t, x, g, sumStep(g, "reduce_from_tensor_model_parallel_region"), identity)
}

// ScatterToTensorModelParallelRegion keeps this rank's chunk of the last
// dimension, [..., n] → [..., n/tp], forward, and all-gathers the gradient
// along the last dimension backward.
func ScatterToTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	const what = "scatter_to_tensor_model_parallel_region"
	return applyMapping(t, x, g, splitLastStep(g, what), gatherLastStep(g, what+" backward"))
}

// GatherFromTensorModelParallelRegion all-gathers x along the last
// dimension, [..., n] → [..., tp·n], forward, and keeps this rank's chunk
// of the gradient backward.
func GatherFromTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	const what = "gather_from_tensor_model_parallel_region"
	return applyMapping(t, x, g, gatherLastStep(g, what), splitLastStep(g, what+" backward"))
}

// ScatterToSequenceParallelRegion keeps this rank's chunk of dim 0,
// [s, ...] → [s/tp, ...], forward, and all-gathers the gradient along dim
// 0 backward. s must be divisible by tp.
func ScatterToSequenceParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	const what = "scatter_to_sequence_parallel_region"
	return applyMapping(t, x, g, splitFirstStep(g, what), gatherFirstStep(g, nil, what+" backward"))
}

// GatherFromSequenceParallelRegion all-gathers x along dim 0,
// [s/tp, ...] → [s, ...], forward (unevenly when outputSplitSizes, one
// size per rank, is given). Backward reduce-scatters the gradient along
// dim 0 when tensorParallelOutputGrad (the region after it is tensor
// parallel, so each rank holds a partial gradient), else keeps this rank's
// chunk.
func GatherFromSequenceParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group, tensorParallelOutputGrad bool, outputSplitSizes []int) *autograd.Var {
	const what = "gather_from_sequence_parallel_region"
	var bwd step
	switch {
	case tensorParallelOutputGrad:
		bwd = reduceScatterFirstStep(g, outputSplitSizes, what+" backward")
	case outputSplitSizes != nil:
		bwd = keepFirstStep(g, outputSplitSizes)
	default:
		bwd = splitFirstStep(g, what+" backward")
	}
	return applyMapping(t, x, g, gatherFirstStep(g, outputSplitSizes, what), bwd)
}

// ReduceScatterToSequenceParallelRegion reduces x over g and keeps this
// rank's chunk of dim 0, [s, ...] → [s/tp, ...], forward (unevenly when
// inputSplitSizes is given); backward all-gathers the gradient along dim 0.
func ReduceScatterToSequenceParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group, inputSplitSizes []int) *autograd.Var {
	const what = "reduce_scatter_to_sequence_parallel_region"
	return applyMapping(t, x, g, reduceScatterFirstStep(g, inputSplitSizes, what), gatherFirstStep(g, inputSplitSizes, what+" backward"))
}

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
// gradients of the gathered tensor are partial sums.
func AllGatherLastDimFromTensorParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	const what = "all_gather_last_dim_from_tensor_parallel_region"
	return applyMapping(t, x, g, gatherLastStep(g, what), reduceScatterLastStep(g, what+" backward"))
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
func ReduceScatterLastDimToTensorParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	const what = "reduce_scatter_last_dim_to_tensor_parallel_region"
	return applyMapping(t, x, g, reduceScatterLastStep(g, what), gatherLastStep(g, what+" backward"))
}
