package nn

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor/kernels"
)

// split decides how many workers to use for rows rows of cols elements each
// (autograd.Tape.RowWorkers).
func split(c *autograd.Ctx, rows, cols int) int { return c.Tape().RowWorkers(rows, cols) }

// parallelRows runs fn(k, lo, hi) for k = 0..n−1 over the rows [lo, hi) of
// the k-th of n near-equal chunks, on n goroutines, and waits. Chunk k always
// covers the same rows for the same (rows, n), so per-chunk partial sums
// combined in k order are deterministic.
func parallelRows(rows, n int, fn func(k, lo, hi int)) {
	kernels.ParallelForWorker(rows, n, fn)
}
