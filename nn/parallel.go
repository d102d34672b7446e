package nn

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor/kernels"
)

// minRowWork is the least number of elements worth a goroutine.
const minRowWork = 1 << 14

// split decides how many workers to use for rows rows of cols elements each:
// at most the tape's workers, and no more than the work justifies.
func split(c *autograd.Ctx, rows, cols int) int {
	n := c.Tape().Workers()
	if w := rows * cols / minRowWork; w < n {
		n = w
	}
	return max(1, min(n, rows))
}

// parallelRows runs fn(k, lo, hi) for k = 0..n−1 over the rows [lo, hi) of
// the k-th of n near-equal chunks, on n goroutines, and waits. Chunk k always
// covers the same rows for the same (rows, n), so per-chunk partial sums
// combined in k order are deterministic.
func parallelRows(rows, n int, fn func(k, lo, hi int)) {
	kernels.ParallelForWorker(rows, n, fn)
}
