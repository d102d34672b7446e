package data

import "fmt"

// Batch is a block of training rows: rows of Seq tokens each, row-major.
type Batch struct {
	Rows, Seq int
	// InputIDs are the input tokens, [Rows, Seq].
	InputIDs []int32
	// Labels are the tokens to predict, [Rows, Seq]: Labels[r, t] is the token after
	// InputIDs[r, t].
	Labels []int32
	// LossMask weights each position's loss, [Rows, Seq]: 1 counts, 0 ignores.
	LossMask []float32
}

// newBatch allocates a Batch of rows×seq positions with a loss mask of ones.
func newBatch(rows, seq int) Batch {
	b := Batch{
		Rows:     rows,
		Seq:      seq,
		InputIDs: make([]int32, rows*seq),
		Labels:   make([]int32, rows*seq),
		LossMask: make([]float32, rows*seq),
	}
	for i := range b.LossMask {
		b.LossMask[i] = 1
	}
	return b
}

// Dataset is the training data as the trainer sees it.
//
// Batch returns rows [row0, row0+rows) of the global batch of training step step (0-based),
// a global batch of rowsTotal rows. It is a pure function of its arguments: the data
// position is fully determined by the step, with no iterator state. So every parallel
// layout sees the same global batch (a data-parallel rank d with b rows per microbatch asks
// for its own rows, g = d·rowsPerRank + b in the usual order), and a run resumed at step s
// continues with exactly the batches of an uninterrupted run. Asking for rows 0..3 at once
// or for 0..1 and 2..3 gives the same rows.
//
// Batch panics if the rows are not within [0, rowsTotal) or step is negative: the trainer
// computes them, so that is a bug in the caller. Implementations are safe for concurrent
// use by the ranks of one process.
type Dataset interface {
	Batch(step, rowsTotal, row0, rows int) Batch
}

// checkRows panics unless 0 <= row0, 0 <= rows, row0+rows <= rowsTotal and step >= 0.
func checkRows(step, rowsTotal, row0, rows int) {
	if step < 0 || row0 < 0 || rows < 0 || row0+rows > rowsTotal {
		panic(fmt.Sprintf("data: Batch(step=%d, rowsTotal=%d, row0=%d, rows=%d): rows [%d,%d) are not within the global batch [0,%d) or step is negative",
			step, rowsTotal, row0, rows, row0, row0+rows, rowsTotal))
	}
}
