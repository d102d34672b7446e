package gpt

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/tensor"
)

// MaskedMeanLoss reduces per-token losses [s·b] (sequence-first, from
// Forward) to scale · Σ loss_t·mask_t / max(Σ mask_t, 1), Megatron's
// loss_func (the scale is 1/num_microbatches under gradient accumulation).
func MaskedMeanLoss(t *autograd.Tape, losses *autograd.Var, b data.Batch, scale float32) *autograd.Var {
	mask := SequenceFirst(b.LossMask, b.Rows, b.Seq)
	var n float64
	for _, m := range mask {
		n += float64(m)
	}
	w := tensor.FromSlice(mask, len(mask))
	w.Scale(scale / float32(max(n, 1)))
	return autograd.WeightedSum(t, losses, w)
}

// SplitBatch returns the part of micro-batch b a rank of the
// context-parallel groups g holds: chunks r and 2·cp−1−r of every row
// (cp.Split), the segments whole (the attention of the rank's chunks
// reads the segment ids of every chunk); b itself without context
// parallelism (Megatron's get_batch_on_this_cp_rank).
func SplitBatch(b data.Batch, g *cp.Groups) data.Batch {
	n := g.Size()
	if n == 1 {
		return b
	}
	r := g.Rank()
	out := data.Batch{Rows: b.Rows, Seq: b.Seq / n,
		InputIDs: cp.Split(b.InputIDs, b.Rows, b.Seq, n, r),
		Labels:   cp.Split(b.Labels, b.Rows, b.Seq, n, r),
		LossMask: cp.Split(b.LossMask, b.Rows, b.Seq, n, r),
		Segments: b.Segments,
	}
	if b.PositionIDs != nil {
		out.PositionIDs = cp.Split(b.PositionIDs, b.Rows, b.Seq, n, r)
	}
	return out
}
