package local

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gotron/gotron/comm"
)

// TestBarrierOrders checks with shared memory what the conformance suite
// cannot: no rank leaves a Barrier before every rank has entered it.
func TestBarrierOrders(t *testing.T) {
	const n, rounds = 4, 50
	var entered atomic.Int64
	err := NewWorld(n, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		for i := range rounds {
			entered.Add(1)
			if err := g.Barrier(ctx); err != nil {
				return err
			}
			if got, want := entered.Load(), int64(n*(i+1)); got < want {
				t.Errorf("rank %d left barrier %d when %d ranks had entered, want ≥ %d", g.Rank(), i, got, want)
			}
			if err := g.Barrier(ctx); err != nil { // keep the next round's entries out of this check
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAllReduceAllocatesNothing checks that a warm blocking all-reduce
// allocates nothing on the heap (meets, wake channels and scratch are
// recycled).
func TestAllReduceAllocatesNothing(t *testing.T) {
	const rounds = 200
	var before, after runtime.MemStats
	err := NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		buf := comm.F32(make([]float32, 10000))
		step := func() error {
			for range rounds {
				if err := g.AllReduce(ctx, buf, comm.Sum); err != nil {
					return err
				}
			}
			return g.Barrier(ctx)
		}
		if err := step(); err != nil { // warm up
			return err
		}
		if g.Rank() == 0 {
			runtime.ReadMemStats(&before)
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		if err := step(); err != nil {
			return err
		}
		if g.Rank() == 0 {
			runtime.ReadMemStats(&after)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A little slack for the runtime's own bookkeeping; a per-operation
	// allocation would show as ≥ 2·rounds.
	if n := after.Mallocs - before.Mallocs; n > rounds/4 {
		t.Errorf("%d all-reduces on 2 ranks made %d heap allocations", rounds, n)
	}
}

func TestRunTwice(t *testing.T) {
	w := NewWorld(1, comm.Options{})
	nop := func(context.Context, comm.Group) error { return nil }
	if err := w.Run(context.Background(), nop); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background(), nop); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Run returned %v, want an error saying a World runs once", err)
	}
}

// TestRunError checks the report of a world where two ranks fail on their
// own and the others stop because of the first.
func TestRunError(t *testing.T) {
	first := errors.New("first failure")
	err := NewWorld(4, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		switch g.Rank() {
		case 2:
			return first
		case 3:
			// Fails on its own, after rank 2 (ordered by the failed barrier).
			if err := g.Barrier(ctx); err == nil {
				return errors.New("barrier succeeded without rank 2")
			}
			return errors.New("second failure")
		}
		return g.Barrier(ctx)
	})
	var re *RunError
	if !errors.As(err, &re) || re.Rank != 2 || !errors.Is(err, first) {
		t.Fatalf("Run returned %v, want a *RunError with root rank 2", err)
	}
	msg := err.Error()
	for _, w := range []string{"rank 2 failed: first failure", "ranks [3] also failed; rank 3: second failure", "ranks [0 1] stopped because of it"} {
		if !strings.Contains(msg, w) {
			t.Errorf("Run's error does not mention %q:\n%s", w, msg)
		}
	}
	var pe *comm.PeerError
	if !errors.As(re.Errs[0], &pe) || pe.FailedRank != 2 || pe.Op != comm.OpBarrier {
		t.Errorf("rank 0's error is %v, want a PeerError in Barrier naming rank 2", re.Errs[0])
	}
}

// TestContextCancelledOnFailure checks that a failure cancels the context
// the other ranks run with, so work outside comm calls can stop too.
func TestContextCancelledOnFailure(t *testing.T) {
	boom := errors.New("boom")
	err := NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		if g.Rank() == 1 {
			return boom
		}
		<-ctx.Done()
		if cause := context.Cause(ctx); !errors.Is(cause, boom) {
			t.Errorf("context cause is %v, want rank 1's error", cause)
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("Run returned %v", err)
	}
}

// TestWaitReportsPeerFailure checks that Work.Wait, given the context Run
// passed to the rank, returns the *comm.PeerError of a world that failed
// while the operation was pending, not the error of that context (which the
// failure cancels too).
func TestWaitReportsPeerFailure(t *testing.T) {
	boom := errors.New("boom")
	for round := range 20 {
		var got error
		issued := make(chan struct{})
		NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
			if g.Rank() == 1 {
				<-issued
				return boom
			}
			wk, err := g.AllReduceAsync(ctx, comm.F32(make([]float32, 8)), comm.Sum)
			close(issued)
			if err != nil {
				got = err
				return err
			}
			got = wk.Wait(ctx)
			return got
		})
		var pe *comm.PeerError
		if !errors.As(got, &pe) || pe.FailedRank != 1 || !errors.Is(got, boom) {
			t.Fatalf("round %d: Wait returned %v, want a *comm.PeerError naming rank 1 and its error", round, got)
		}
	}
}
