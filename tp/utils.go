package tp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// Divide returns a/b when b divides a exactly, else an error
// "{a} is not divisible by {b}" (Megatron's divide and
// ensure_divisibility). Callers add what the numbers are.
func Divide(a, b int) (int, error) {
	if b == 0 || a%b != 0 {
		return 0, fmt.Errorf("%d is not divisible by %d", a, b)
	}
	return a / b, nil
}

// VocabRangeFromPerPartitionVocabSize returns the half-open range
// [start, end) of vocabulary rows held by rank when every one of the ws
// ranks holds perPartition rows (VocabUtility, docs/SEMANTICS.md § Vocabulary
// split and weight initialisation):
//
//	start = rank·perPartition, end = start + perPartition
func VocabRangeFromPerPartitionVocabSize(perPartition, rank, ws int) (start, end int) {
	start = rank * perPartition
	return start, start + perPartition
}

// VocabRangeFromGlobalVocabSize returns the half-open range [start, end)
// of the global vocabulary of vocabSize rows held by rank out of ws:
// perPartition = vocabSize/ws, then as VocabRangeFromPerPartitionVocabSize.
// For example vocabSize 1600 over ws 8 gives rank r the rows
// [200r, 200r+200). vocabSize must be divisible by ws (pad the vocabulary
// first); otherwise it returns an error.
func VocabRangeFromGlobalVocabSize(vocabSize, rank, ws int) (start, end int, err error) {
	n, err := Divide(vocabSize, ws)
	if err != nil {
		return 0, 0, fmt.Errorf("tp: vocab range: the vocabulary size is not a multiple of the tensor-parallel size (%w); pad it to a multiple of %d", err, ws)
	}
	start, end = VocabRangeFromPerPartitionVocabSize(n, rank, ws)
	return start, end, nil
}

// SplitTensorAlongLastDim splits x [..., n] into k pieces [..., n/k] along
// the last dimension, in order. The pieces are views sharing x's storage
// (strided unless x's last dimension is its only one), or contiguous
// copies when contiguous is set. n must be divisible by k; otherwise it
// returns an error naming both.
func SplitTensorAlongLastDim(x *tensor.Tensor, k int, contiguous bool) ([]*tensor.Tensor, error) {
	if x.Rank() == 0 {
		return nil, fmt.Errorf("tp: split tensor along last dim: the tensor is a scalar")
	}
	if k < 1 {
		return nil, fmt.Errorf("tp: split tensor along last dim: %d partitions; want at least 1", k)
	}
	size, err := Divide(x.Dim(-1), k)
	if err != nil {
		return nil, fmt.Errorf("tp: split tensor along last dim of %v into %d partitions: %w", x.Shape(), k, err)
	}
	out := make([]*tensor.Tensor, k)
	for i := range out {
		out[i] = x.Narrow(x.Rank()-1, i*size, size)
		if contiguous {
			out[i] = out[i].Contiguous()
		}
	}
	return out, nil
}

// SplitTensorInto1DEqualChunks returns this rank's equal piece of x
// flattened: with n = x.Len() and c = ⌊n/tp⌋ (integer floor, so the last
// n mod tp elements belong to no rank), rank r gets
//
//	flat(x)[r·c : (r+1)·c]   as a 1-D tensor [c].
//
// It is a view of x's storage, or a new tensor when newBuffer is set. A
// view needs a contiguous x: passing a strided x without newBuffer is a
// programmer bug and panics. A nil group counts as one rank.
func SplitTensorInto1DEqualChunks(x *tensor.Tensor, g comm.Group, newBuffer bool) *tensor.Tensor {
	n := x.Len()
	c := n / worldSize(g)
	start := c * rankOf(g)
	if newBuffer {
		x = x.Contiguous()
	} else if !x.IsContiguous() {
		panic(fmt.Sprintf("tp: SplitTensorInto1DEqualChunks: a view of a non-contiguous tensor %v; pass newBuffer or a contiguous tensor", x.Shape()))
	}
	piece := x.View(n).Narrow(0, start, c)
	if newBuffer {
		return piece.Clone()
	}
	return piece
}

// GatherSplit1DTensor is the inverse of SplitTensorInto1DEqualChunks: it
// all-gathers every rank's piece x (flattened, [c] elements each, rank
// order) into a new 1-D tensor [tp·c]. On a group of one rank (or nil) it
// returns a flat copy of x.
func GatherSplit1DTensor(ctx context.Context, x *tensor.Tensor, g comm.Group) (*tensor.Tensor, error) {
	flat := x.Contiguous()
	flat = flat.View(flat.Len())
	ws := worldSize(g)
	if ws == 1 {
		return flat.Clone(), nil
	}
	y := tensor.New(ws * flat.Len())
	if err := g.AllGather(ctx, comm.F32(y.Data()), comm.F32(flat.Data())); err != nil {
		return nil, fmt.Errorf("tp: gather split 1-D tensor: all-gather over %s: %w", groupName(g), err)
	}
	return y, nil
}
