package autograd

import (
	"context"
	"sync"
)

// Tape is the autograd record of one pass of one rank: the pass's
// context, its no-grad depth, its activation memory and its first error.
// It is not safe for concurrent use by several goroutines; each rank makes
// its own for each pass (see the package doc).
type Tape struct {
	ctx     context.Context
	noGrad  int
	workers int
	mu      sync.Mutex // guards err: hooks may fail from other goroutines
	err     error
	mem     activationMemory
	// wgrad collects the parameters' gradient work while a BackwardSplit
	// runs (nil otherwise); call is the innermost running Backward's
	// bookkeeping, for Ctx.AccumulateParam.
	wgrad *WeightGrads
	call  *backwardCall
}

// NewTape returns a tape for a pass whose collectives run under ctx.
// It starts with one worker.
func NewTape(ctx context.Context) *Tape { return &Tape{ctx: ctx, workers: 1} }

// SetWorkers sets how many goroutines the rank's fused kernels may use
// (the cores given to the rank); n < 1 means 1.
func (t *Tape) SetWorkers(n int) { t.workers = max(n, 1) }

// Workers returns the number of goroutines the rank's kernels may use.
func (t *Tape) Workers() int { return t.workers }

// minRowWork is the least number of elements worth a goroutine.
const minRowWork = 1 << 14

// RowWorkers returns how many goroutines a loop over rows rows of cols
// elements each should use: at most the tape's workers, at most one per
// row, and no more than the work justifies (one per 16 Ki elements).
func (t *Tape) RowWorkers(rows, cols int) int {
	n := t.workers
	if w := rows * cols / minRowWork; w < n {
		n = w
	}
	return max(1, min(n, rows))
}

// Context returns the tape's context.
func (t *Tape) Context() context.Context { return t.ctx }

// NoGrad turns off graph recording until the returned function is called
// (as torch.no_grad). Calls nest.
func (t *Tape) NoGrad() (restore func()) {
	t.noGrad++
	return func() { t.noGrad-- }
}

// Recording reports whether operations are being recorded for backward.
func (t *Tape) Recording() bool { return t.noGrad == 0 }

// Fail records err as the tape's error if it is the first one.
func (t *Tape) Fail(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

// Err returns the first error recorded on the tape.
func (t *Tape) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Reset clears the tape's error, for reuse after it has been handled.
func (t *Tape) Reset() {
	t.mu.Lock()
	t.err = nil
	t.mu.Unlock()
}
