//go:build mpi

package mpi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

var errInjected = errors.New("injected failure of the last rank")

// runWorld runs fn in a fresh World with opts and closes it.
func runWorld(t testing.TB, opts comm.Options, fn func(ctx context.Context, g comm.Group) error) error {
	t.Helper()
	w, err := NewWorld(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = w.Run(ctx, fn)
	if cerr := w.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	return err
}

// TestFailureMidOp fails the last rank while every other rank is blocked
// in a different kind of wait: a Recv from it, a subgroup collective, the
// Wait of an async world collective. With a 30 s timeout, each must return
// a *comm.PeerError naming the last rank and carrying its error — a
// *comm.TimeoutError would mean it waited for the timeout instead — and
// every rank's Run must report the last rank's error as the root cause.
func TestFailureMidOp(t *testing.T) {
	n := worldSize(t)
	if n < 2 {
		t.Skip("needs at least 2 ranks")
	}
	last := n - 1
	var me int
	err := runWorld(t, comm.Options{Timeout: 30 * time.Second}, func(ctx context.Context, g comm.Group) error {
		me = g.Rank()
		pairs, err := g.NewSubgroups(ctx, "pairs", [][]int{{0, last}})
		if err != nil {
			return err
		}
		// Everyone has joined one collective, so the failure comes mid-run.
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		buf := comm.F32(make([]float32, 1<<16))
		var opErr error
		switch {
		case me == last:
			// Be mid-operation (waiting for a message rank 0 never sends),
			// then fail.
			if _, err := pairs.RecvAsync(ctx, buf, 0); err != nil {
				return err
			}
			return errInjected
		case me == 0:
			opErr = pairs.Recv(ctx, buf, 1)
		case me%2 == 1:
			opErr = g.AllGather(ctx, comm.F32(make([]float32, 2*n)), comm.F32(make([]float32, 2)))
		default:
			w, err := g.AllGatherAsync(ctx, comm.F32(make([]float32, 2*n)), comm.F32(make([]float32, 2)))
			if err != nil {
				return err
			}
			opErr = w.Wait(ctx)
		}
		if me == 0 {
			t.Logf("rank 0's Recv returned: %v", opErr)
		}
		var pe *comm.PeerError
		if !errors.As(opErr, &pe) || pe.FailedRank != last || !errors.Is(opErr, errInjected) {
			t.Errorf("rank %d: the pending call returned %v, want a *comm.PeerError naming rank %d and its error", me, opErr, last)
		}
		return opErr
	})
	var re *RunError
	if !errors.As(err, &re) || re.Rank != last || !errors.Is(err, errInjected) {
		t.Fatalf("rank %d: Run returned %v, want a *RunError whose root cause is rank %d's error", me, err, last)
	}
	if me == 0 {
		t.Logf("rank 0's Run returned: %v", err)
	}
	if me != last && !strings.Contains(err.Error(), "stopped because of it") {
		t.Errorf("rank %d: Run's error does not say this rank stopped because of the failure:\n%v", me, err)
	}
}

// TestRunUnreached: the last rank stays in its fn past the timeout while
// the others have returned; rank 0's Run gives up agreeing and says so
// (Unreached), and the straggler, released afterwards by rank 0 through
// another World, still completes the agreement and returns nil.
func TestRunUnreached(t *testing.T) {
	n := worldSize(t)
	if n < 2 {
		t.Skip("needs at least 2 ranks")
	}
	last := n - 1
	err := runWorld(t, comm.Options{Timeout: 30 * time.Second}, func(ctx context.Context, side comm.Group) error {
		w, err := NewWorld(comm.Options{Timeout: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		token := comm.I64(make([]int64, 1))
		runErr := w.Run(ctx, func(ctx context.Context, g comm.Group) error {
			if g.Rank() == last {
				return side.Recv(ctx, token, 0) // until rank 0's Run has returned
			}
			return nil
		})
		if cerr := w.Close(); cerr != nil {
			t.Errorf("Close: %v", cerr)
		}
		var re *RunError
		switch r := side.Rank(); {
		case r == last && runErr != nil:
			t.Errorf("rank %d (the straggler): Run returned %v, want nil", r, runErr)
		case r == 0 && (!errors.As(runErr, &re) || !re.Unreached || !strings.Contains(runErr.Error(), "did not return")):
			t.Errorf("rank %d: Run returned %v, want a *RunError with Unreached", r, runErr)
		case r != 0 && r != last && runErr != nil && (!errors.As(runErr, &re) || !re.Unreached):
			// Ranks between may still be agreeing when the straggler
			// arrives: they see nil or Unreached.
			t.Errorf("rank %d: Run returned %v, want nil or a *RunError with Unreached", r, runErr)
		}
		if side.Rank() == 0 {
			return side.Send(ctx, token, last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDetailMismatch covers the mismatches whose values travel as hashes:
// AllGatherV counts, AllToAllV split sizes and NewSubgroups partitions.
// Every rank must get the same *comm.MismatchError, printing both values,
// and the group must work afterwards.
func TestDetailMismatch(t *testing.T) {
	n := worldSize(t)
	if n < 2 {
		t.Skip("needs at least 2 ranks")
	}
	last := n - 1
	err := runWorld(t, comm.Options{Timeout: 30 * time.Second}, func(ctx context.Context, g comm.Group) error {
		r := g.Rank()
		check := func(call string, err error, what string, words ...string) {
			if r == 0 {
				t.Logf("%s: %v", call, err)
			}
			var me *comm.MismatchError
			if !errors.As(err, &me) || me.What != what {
				t.Errorf("rank %d: %s returned %v, want a *comm.MismatchError about %s", r, call, err, what)
				return
			}
			for _, w := range words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("rank %d: %s: %q does not mention %q", r, call, err, w)
				}
			}
		}
		counts := make([]int, n)
		for k := range counts {
			counts[k] = 1
		}
		if r == last {
			counts[0] = 2
		}
		in := comm.F32(make([]float32, counts[r]))
		out := comm.F32(make([]float32, n-1+counts[0]))
		check("AllGatherV", g.AllGatherV(ctx, out, in, counts), "counts", "[1 ", "[2 ")

		send, recv := make([]int, n), make([]int, n)
		for k := range n {
			send[k], recv[k] = 1, 1
		}
		if r == last {
			recv[0] = 3
		}
		a2aIn := comm.I64(make([]int64, n))
		a2aOut := comm.I64(make([]int64, n-1+recv[0]))
		check("AllToAllV", g.AllToAllV(ctx, a2aOut, a2aIn, send, recv), "split sizes",
			"sendCounts[", "recvCounts[0] = 3")

		part := [][]int{identity(n)}
		if r == last {
			part = [][]int{identity(n)[1:], {0}}
		}
		_, err := g.NewSubgroups(ctx, "tp", part)
		check("NewSubgroups", err, "partition")

		x := []float32{float32(r + 1)}
		if err := g.AllReduce(ctx, comm.F32(x), comm.Sum); err != nil {
			return err
		}
		if want := float32(n * (n + 1) / 2); x[0] != want {
			t.Errorf("rank %d: AllReduce after the mismatches gave %v, want %v", r, x[0], want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
