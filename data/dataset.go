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
	// PositionIDs, when not nil, hold each input token's position, [Rows, Seq]
	// (--reset-position-ids: positions restart at 0 after every end of
	// document). Nil means positions 0..Seq−1 in every row.
	PositionIDs []int32
	// Segments, when not nil, number the documents of each row, [Rows, Seq]
	// (--reset-attention-mask): Segments[r, t] is the number of end-of-document
	// tokens among InputIDs[r, 0..t−1], and position t attends to position
	// u ≤ t only when Segments[r, u] == Segments[r, t]. Nil means causal
	// attention over the whole row.
	Segments []int32
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

// Step identifies the global batch of one training step: its index (0-based), its size
// in rows, and the samples the steps before it consumed: Index·Rows when every global
// batch has the same size (ConstantStep), more or less under a batch-size ramp.
type Step struct {
	Index, Rows int
	Consumed    int64
}

// ConstantStep returns step index of a run whose global batches all hold rows rows.
func ConstantStep(index, rows int) Step {
	return Step{Index: index, Rows: rows, Consumed: int64(index) * int64(rows)}
}

// Dataset is the training data as the trainer sees it.
//
// Batch returns rows [row0, row0+rows) of the global batch of step. It is a pure function
// of its arguments: the data position is fully determined by the step, with no iterator
// state. So every parallel layout sees the same global batch (a data-parallel rank d with
// b rows per microbatch asks for its own rows: its micro-batch m holds rows (m·dp + d)·b
// to (m·dp + d + 1)·b, as the reference's sampler deals them out), and a run resumed at
// step s continues with exactly the batches of an uninterrupted run. Asking for rows 0..3
// at once or for 0..1 and 2..3 gives the same rows.
//
// Batch panics if the rows are not within [0, step.Rows) or the step's index or consumed
// samples are negative: the trainer computes them, so that is a bug in the caller.
// Implementations are safe for concurrent use by the ranks of one process.
type Dataset interface {
	Batch(step Step, row0, rows int) Batch
}

// checkRows panics unless 0 <= row0, 0 <= rows, row0+rows <= step.Rows, and the step's
// index and consumed samples are not negative.
func checkRows(step Step, row0, rows int) {
	if step.Index < 0 || step.Consumed < 0 || row0 < 0 || rows < 0 || row0+rows > step.Rows {
		panic(fmt.Sprintf("data: Batch(step=%+v, row0=%d, rows=%d): rows [%d,%d) are not within the global batch [0,%d) or the step is negative",
			step, row0, rows, row0, row0+rows, step.Rows))
	}
}
