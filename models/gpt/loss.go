package gpt

import (
	"github.com/gotron/gotron/autograd"
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
