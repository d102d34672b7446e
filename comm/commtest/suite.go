package commtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

// World runs a per-rank function on every rank of a world: local.World's
// Run, or, for a multi-process backend, a Run that calls fn once for this
// process's rank. Run returns a non-nil error when some rank failed.
type World interface {
	Run(ctx context.Context, fn func(ctx context.Context, g comm.Group) error) error
}

// Backend describes a backend to the suite.
type Backend struct {
	// NewWorld returns a world of n ranks with opts, or nil when the backend
	// cannot make one of that size (a multi-process backend can make only
	// the world it was started with); the sizes it cannot make are skipped.
	NewWorld func(n int, opts comm.Options) World
	// Sizes lists the world sizes to test.
	Sizes []int
	// Failures says that the backend turns a rank's failure or timeout into
	// prompt *comm.PeerErrors on every other rank, that its Run returns the
	// first failure as the root cause, and that its timeout reports name
	// every member's state. Without it those cases are skipped.
	Failures bool
	// Mismatches says that members whose arguments disagree (sizes,
	// dtypes, roots, operations) all get a *comm.MismatchError. Without it
	// those cases are skipped (MPI leaves such programs undefined).
	Mismatches bool
}

// Case is one test of the suite: a per-rank function that checks its own
// results, computing what it expects from the rank numbers alone.
type Case struct {
	Name    string
	MinSize int // smallest world the case makes sense for (at least 1)
	// Failures and Mismatches mark cases that need those Backend
	// capabilities.
	Failures, Mismatches bool
	// Options are the world's options.
	Options comm.Options
	// Rank runs on every rank. It returns a *Failure when a result is
	// wrong; the harness reports those as test errors at once, whatever
	// else Run returns.
	Rank func(ctx context.Context, g comm.Group) error
	// Check judges the error of the world's Run; nil means Run must return
	// nil.
	Check func(n int, err error) error
}

// Failure is the error a Case's Rank function returns for a wrong result.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

// failf returns a *Failure naming the rank.
func failf(g comm.Group, format string, args ...any) error {
	return &Failure{Msg: fmt.Sprintf("rank %d of %q: ", g.Rank(), g.Name()) + fmt.Sprintf(format, args...)}
}

// caseTimeout bounds each case, so that a backend that hangs fails the case
// instead of the whole test binary. Cases never wait for it to pass.
const caseTimeout = 60 * time.Second

// Run runs every case on every size of b, each case in a fresh world, as
// subtests named "n=<size>/<case>".
func Run(t *testing.T, b Backend) {
	for _, n := range b.Sizes {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			for _, c := range Cases() {
				t.Run(c.Name, func(t *testing.T) { RunCase(t, b, n, c) })
			}
		})
	}
}

// RunCase runs one case in a world of n ranks.
func RunCase(t *testing.T, b Backend, n int, c Case) {
	switch {
	case n < max(c.MinSize, 1):
		t.Skipf("needs at least %d ranks", c.MinSize)
	case c.Failures && !b.Failures:
		t.Skip("the backend does not propagate failures")
	case c.Mismatches && !b.Mismatches:
		t.Skip("the backend does not detect mismatched arguments")
	}
	w := b.NewWorld(n, c.Options)
	if w == nil {
		t.Skipf("the backend cannot make a world of %d ranks", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	err := w.Run(ctx, func(ctx context.Context, g comm.Group) error {
		err := c.Rank(ctx, g)
		if f := (*Failure)(nil); errors.As(err, &f) {
			t.Error(f)
		}
		return err
	})
	switch {
	case c.Check != nil:
		if cerr := c.Check(n, err); cerr != nil {
			t.Errorf("Run's error: %v\n%v", cerr, err)
		}
	case err != nil:
		t.Errorf("Run: %v", err)
	}
}

// Cases returns every case of the suite.
func Cases() []Case {
	var cs []Case
	cs = append(cs, collectiveCases()...)
	cs = append(cs, p2pCases()...)
	cs = append(cs, groupCases()...)
	cs = append(cs, errorCases()...)
	return cs
}

// sizes returns the buffer lengths worth testing in a group of n: empty, one
// element, odd, not divisible by n, and one large enough to span several
// reduction blocks.
func sizes(n int) []int { return []int{0, 1, 7, 5*n + 3, 3000 + n} }
