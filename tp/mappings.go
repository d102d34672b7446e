package tp

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// Each mapping is a Function pair (megatron-semantics.md §2.11); every one
// is the identity, forward and backward, on a group of one rank.

// CopyToTensorModelParallelRegion is the identity forward and an all-reduce
// (SUM) of the gradient over g backward: the entry to a tensor-parallel
// region whose ranks each use the whole input.
func CopyToTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, copyToTP{g}, x)
}

type copyToTP struct{ g comm.Group }

func (f copyToTP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return in[0], nil
}

func (f copyToTP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := allReduce(c.Context(), f.g, dy, comm.Sum, "copy_to_tensor_model_parallel_region backward")
	return []*tensor.Tensor{dx}, err
}

// ReduceFromTensorModelParallelRegion all-reduces (SUM) x over g forward;
// the gradient passes through unchanged: the exit of a tensor-parallel
// region whose ranks hold partial sums.
func ReduceFromTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, reduceFromTP{g}, x)
}

type reduceFromTP struct{ g comm.Group }

func (f reduceFromTP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return allReduce(c.Context(), f.g, in[0], comm.Sum, "reduce_from_tensor_model_parallel_region")
}

func (f reduceFromTP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{dy}, nil
}

// ScatterToTensorModelParallelRegion keeps this rank's chunk of the last
// dimension, [..., n] → [..., n/tp], forward, and all-gathers the gradient
// along the last dimension backward.
func ScatterToTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, scatterToTP{g}, x)
}

type scatterToTP struct{ g comm.Group }

func (f scatterToTP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return splitLast(f.g, in[0], "scatter_to_tensor_model_parallel_region")
}

func (f scatterToTP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := gatherLast(c.Context(), f.g, dy, "scatter_to_tensor_model_parallel_region backward")
	return []*tensor.Tensor{dx}, err
}

// GatherFromTensorModelParallelRegion all-gathers x along the last
// dimension, [..., n] → [..., tp·n], forward, and keeps this rank's chunk
// of the gradient backward.
func GatherFromTensorModelParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, gatherFromTP{g}, x)
}

type gatherFromTP struct{ g comm.Group }

func (f gatherFromTP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return gatherLast(c.Context(), f.g, in[0], "gather_from_tensor_model_parallel_region")
}

func (f gatherFromTP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := splitLast(f.g, dy, "gather_from_tensor_model_parallel_region backward")
	return []*tensor.Tensor{dx}, err
}

// ScatterToSequenceParallelRegion keeps this rank's chunk of dim 0,
// [s, ...] → [s/tp, ...], forward, and all-gathers the gradient along dim
// 0 backward. s must be divisible by tp.
func ScatterToSequenceParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, scatterToSP{g}, x)
}

type scatterToSP struct{ g comm.Group }

func (f scatterToSP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return splitFirst(f.g, in[0], "scatter_to_sequence_parallel_region")
}

func (f scatterToSP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx, err := gatherFirst(c.Context(), f.g, dy, "scatter_to_sequence_parallel_region backward")
	return []*tensor.Tensor{dx}, err
}

// GatherFromSequenceParallelRegion all-gathers x along dim 0,
// [s/tp, ...] → [s, ...], forward (unevenly when outputSplitSizes, one
// size per rank, is given). Backward reduce-scatters the gradient along
// dim 0 when tensorParallelOutputGrad (the region after it is tensor
// parallel, so each rank holds a partial gradient), else keeps this rank's
// chunk.
func GatherFromSequenceParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group, tensorParallelOutputGrad bool, outputSplitSizes []int) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, gatherFromSP{g, tensorParallelOutputGrad, outputSplitSizes}, x)
}

type gatherFromSP struct {
	g          comm.Group
	tpGrad     bool
	splitSizes []int
}

func (f gatherFromSP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	const what = "gather_from_sequence_parallel_region"
	if f.splitSizes != nil {
		return gatherFirstV(c.Context(), f.g, in[0], f.splitSizes, what)
	}
	return gatherFirst(c.Context(), f.g, in[0], what)
}

func (f gatherFromSP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	const what = "gather_from_sequence_parallel_region backward"
	var dx *tensor.Tensor
	var err error
	switch {
	case f.tpGrad && f.splitSizes != nil:
		dx, err = reduceScatterFirstV(c.Context(), f.g, dy, f.splitSizes, what)
	case f.tpGrad:
		dx, err = reduceScatterFirst(c.Context(), f.g, dy, what)
	case f.splitSizes != nil:
		off := 0
		for r := 0; r < rankOf(f.g); r++ {
			off += f.splitSizes[r]
		}
		dx = dy.Narrow(0, off, f.splitSizes[rankOf(f.g)]).Contiguous()
	default:
		dx, err = splitFirst(f.g, dy, what)
	}
	return []*tensor.Tensor{dx}, err
}

// ReduceScatterToSequenceParallelRegion reduces x over g and keeps this
// rank's chunk of dim 0, [s, ...] → [s/tp, ...], forward (unevenly when
// inputSplitSizes is given); backward all-gathers the gradient along dim 0.
func ReduceScatterToSequenceParallelRegion(t *autograd.Tape, x *autograd.Var, g comm.Group, inputSplitSizes []int) *autograd.Var {
	if worldSize(g) == 1 {
		return x
	}
	return autograd.Apply(t, reduceScatterToSP{g, inputSplitSizes}, x)
}

type reduceScatterToSP struct {
	g          comm.Group
	splitSizes []int
}

func (f reduceScatterToSP) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	const what = "reduce_scatter_to_sequence_parallel_region"
	if f.splitSizes != nil {
		return reduceScatterFirstV(c.Context(), f.g, in[0], f.splitSizes, what)
	}
	return reduceScatterFirst(c.Context(), f.g, in[0], what)
}

func (f reduceScatterToSP) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	const what = "reduce_scatter_to_sequence_parallel_region backward"
	var dx *tensor.Tensor
	var err error
	if f.splitSizes != nil {
		dx, err = gatherFirstV(c.Context(), f.g, dy, f.splitSizes, what)
	} else {
		dx, err = gatherFirst(c.Context(), f.g, dy, what)
	}
	return []*tensor.Tensor{dx}, err
}
