package gptdata

import (
	"fmt"

	"github.com/gotron/gotron/data"
)

// Batches adapts a Dataset to the trainer's data.Dataset: row g of the
// global batch of step s is sample s.Consumed + g, as the reference's
// MegatronPretrainingSampler reads the samples in order from the consumed
// count. The rows of one step are the same whichever ranks ask for which of
// them.
type Batches struct {
	ds Dataset
}

var _ data.Dataset = (*Batches)(nil)

// NewBatches returns ds as the trainer's data.
func NewBatches(ds Dataset) *Batches { return &Batches{ds: ds} }

// Batch returns rows [row0, row0+rows) of the global batch of step:
// InputIDs = Tokens[:seq], Labels = Tokens[1:], the loss mask, and the
// position ids and segments when the dataset makes them (nil otherwise).
//
// It panics when the rows are not within the step (as data.Dataset
// documents) or a row's sample index, step.Consumed + row, is not below
// Len(): the trainer's counts come from the same numbers as the datasets'
// (see [NumSamples] and [Build]), so either is a bug in the caller.
func (b *Batches) Batch(step data.Step, row0, rows int) data.Batch {
	if step.Index < 0 || step.Consumed < 0 || row0 < 0 || rows < 0 || row0+rows > step.Rows {
		panic(fmt.Sprintf("gptdata: Batch(step=%+v, row0=%d, rows=%d): rows [%d,%d) are not within the global batch [0,%d) or the step is negative",
			step, row0, rows, row0, row0+rows, step.Rows))
	}
	seq := b.ds.SeqLength()
	out := data.Batch{Rows: rows, Seq: seq,
		InputIDs: make([]int32, rows*seq), Labels: make([]int32, rows*seq), LossMask: make([]float32, rows*seq)}
	for r := range rows {
		i := step.Consumed + int64(row0+r)
		if i >= int64(b.ds.Len()) {
			panic(fmt.Sprintf("gptdata: Batch(step=%+v, row %d): sample %d, the dataset has %d (build it for the run's samples)", step, row0+r, i, b.ds.Len()))
		}
		s := b.ds.Sample(int(i))
		o := r * seq
		copy(out.InputIDs[o:o+seq], s.Tokens[:seq])
		copy(out.Labels[o:o+seq], s.Tokens[1:])
		copy(out.LossMask[o:o+seq], s.LossMask)
		if s.PositionIDs != nil {
			if out.PositionIDs == nil {
				out.PositionIDs = make([]int32, rows*seq)
			}
			copy(out.PositionIDs[o:o+seq], s.PositionIDs)
		}
		if s.Segments != nil {
			if out.Segments == nil {
				out.Segments = make([]int32, rows*seq)
			}
			copy(out.Segments[o:o+seq], s.Segments)
		}
	}
	return out
}
