package local

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/comm"
)

// World is a world of n ranks that run as goroutines of this process and
// communicate through shared memory. Build it with NewWorld and run it once
// with Run.
type World struct {
	n       int
	timeout time.Duration // 0: no bound
	spin    bool          // waiters poll briefly before parking: n ≤ GOMAXPROCS

	// events is closed and replaced whenever a rank fails or exits, waking
	// every waiter to look again.
	events atomic.Pointer[chan struct{}]
	dead   atomic.Bool // some rank has failed

	mu      sync.Mutex
	started bool
	first   *comm.PeerError // the first failure: FailedRank and Cause
	cancel  context.CancelCauseFunc
	ranks   []rankState
}

// rankState is what the world knows of one rank.
type rankState struct {
	failed error // its failure, nil while healthy (guarded by World.mu)
	exited bool  // its Run function has returned (guarded by World.mu)

	actMu sync.Mutex
	act   activity // what it is blocked in (guarded by actMu)
}

// activity is one blocked call of a rank, for hang reports.
type activity struct {
	active bool
	tab    *table
	kind   opKind
	seq    uint64
	party  int
}

// NewWorld returns a world of n ≥ 1 ranks. It panics if n < 1 (a programmer
// bug).
func NewWorld(n int, opts comm.Options) *World {
	if n < 1 {
		panic(fmt.Sprintf("local: NewWorld(%d): a world needs at least one rank", n))
	}
	w := &World{n: n, timeout: opts.EffectiveTimeout(), spin: n <= runtime.GOMAXPROCS(0), ranks: make([]rankState, n)}
	ch := make(chan struct{})
	w.events.Store(&ch)
	return w
}

// Size returns the number of ranks.
func (w *World) Size() int { return w.n }

// Run runs fn on every rank, each in its own goroutine, with the world group
// (named "world", group rank = world rank), and returns when every fn has
// returned. A World runs once; a second Run returns an error.
//
// When a rank's fn returns an error or panics (the panic is recovered and
// its stack kept in a *comm.PanicError), the world fails: every other rank's
// pending and later calls return a *comm.PeerError naming that rank and its
// error, and the context given to fn is cancelled with such a
// *comm.PeerError as its cause.
// A rank that gives up waiting (a *comm.TimeoutError) fails the world the
// same way, and so does one whose operation can never complete because a
// member returned from fn without issuing it (the error names that member). Run then returns a *RunError whose root cause is the first
// failure, not the consequences on the other ranks. Run returns nil when
// every fn returned nil.
func (w *World) Run(ctx context.Context, fn func(ctx context.Context, g comm.Group) error) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("local: World.Run called twice; a World runs once, build another with NewWorld")
	}
	w.started = true
	rctx, cancel := context.WithCancelCause(ctx)
	w.cancel = cancel
	w.mu.Unlock()
	defer cancel(nil)

	world := newCore(w, "world", identity(w.n))
	errs := make([]error, w.n)
	var wg sync.WaitGroup
	for r := range w.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runRank(rctx, r, &group{c: world, rank: r}, fn)
			errs[r] = err
			w.exit(r, err)
		}()
	}
	wg.Wait()
	return w.runError(errs)
}

func runRank(ctx context.Context, r int, g comm.Group, fn func(context.Context, comm.Group) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &comm.PanicError{Rank: r, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, g)
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// exit records that rank r's fn returned err. The failure and the exit are
// recorded together, so no waiter sees the rank gone without its error.
func (w *World) exit(r int, err error) {
	w.record(r, err, true)
}

// fail records that rank r failed with err; the first failure of the world
// becomes the cause every later call reports.
func (w *World) fail(r int, err error) {
	w.record(r, err, false)
}

// record notes rank r's failure err (if not nil) and, if exited, that its fn
// has returned, then wakes every waiter. When err is itself a
// *comm.PeerError, the rank it names is the root of the world's failure.
func (w *World) record(r int, err error, exited bool) {
	var first *comm.PeerError
	w.mu.Lock()
	if exited {
		w.ranks[r].exited = true
	}
	if err != nil {
		if w.ranks[r].failed == nil {
			w.ranks[r].failed = err
		}
		if w.first == nil {
			root, cause := r, err
			if pe := (*comm.PeerError)(nil); errors.As(err, &pe) {
				root, cause = pe.FailedRank, pe.Cause
			}
			w.first = &comm.PeerError{FailedRank: root, Cause: cause}
			w.dead.Store(true)
			first = w.first
		}
	}
	cancel := w.cancel
	w.mu.Unlock()
	if first != nil && cancel != nil {
		cancel(first)
	}
	w.signal()
}

// signal wakes every waiter to re-examine the world.
func (w *World) signal() {
	ch := make(chan struct{})
	close(*w.events.Swap(&ch))
}

// failure returns the first failure, or nil.
func (w *World) failure() *comm.PeerError {
	if !w.dead.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// rankStatus returns rank r's failure and whether its fn has returned.
func (w *World) rankStatus(r int) (failed error, exited bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ranks[r].failed, w.ranks[r].exited
}

func (w *World) runError(errs []error) error {
	w.mu.Lock()
	first := w.first
	w.mu.Unlock()
	if first == nil {
		return nil
	}
	return &RunError{Rank: first.FailedRank, Err: first.Cause, Errs: errs}
}

// RunError is Run's error: the first failure of the world, with every
// rank's own error beside it.
type RunError struct {
	Rank int     // world rank of the first failure
	Err  error   // its error: the root cause
	Errs []error // every rank's error, indexed by rank; nil where fn returned nil
}

func (e *RunError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "local: rank %d failed: %v", e.Rank, e.Err)
	var others, consequences []int
	for r, err := range e.Errs {
		if err == nil || r == e.Rank {
			continue
		}
		var pe *comm.PeerError
		if errors.As(err, &pe) {
			consequences = append(consequences, r)
		} else {
			others = append(others, r)
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "\n(ranks %v also failed; rank %d: %v)", others, others[0], e.Errs[others[0]])
	}
	if len(consequences) > 0 {
		fmt.Fprintf(&b, "\n(ranks %v stopped because of it)", consequences)
	}
	return b.String()
}

// Unwrap returns the root cause, Err.
func (e *RunError) Unwrap() error { return e.Err }
