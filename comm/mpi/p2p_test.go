//go:build mpi

package mpi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

// TestMessageMismatches covers the mismatches the conformance suite does
// not (it sends fewer elements than the receiver expects): a message longer
// than the receive buffer (MPI_ERR_TRUNCATE at the receiver), dtypes of the
// same size and of different sizes, and an empty message against a
// non-empty receive. Both sides of each must get a *comm.MismatchError
// naming the sender as Rank and the receiver as Peer and mentioning both
// buffers, and a matching message afterwards must arrive intact, in the
// blocking, async and batched forms alike.
func TestMessageMismatches(t *testing.T) {
	if worldSize(t) < 2 {
		t.Skip("needs at least 2 ranks")
	}
	cases := []struct {
		name       string
		sent, recv comm.Buffer
		words      []string // in both sides' errors; the receiver of a longer message knows only that it is longer
	}{
		{"longer", comm.F32(make([]float32, 5)), comm.F32(make([]float32, 4)), []string{"float32[", "float32[4]"}},
		{"dtype same size", comm.BF16(make([]uint16, 6)), comm.F16(make([]uint16, 6)), []string{"bfloat16[6]", "float16[6]"}},
		{"dtype other size", comm.I64(make([]int64, 2)), comm.F32(make([]float32, 4)), []string{"int64[2]", "float32[4]"}},
		{"empty", comm.F32(nil), comm.F32(make([]float32, 1)), []string{"float32[0]", "float32[1]"}},
	}
	forms := []string{"blocking", "async", "batch"}
	err := runWorld(t, comm.Options{Timeout: 30 * time.Second}, func(ctx context.Context, g comm.Group) error {
		r := g.Rank()
		if r > 1 {
			return nil
		}
		do := func(form string, send bool, buf comm.Buffer) error {
			peer := 1 - r
			switch form {
			case "async":
				var w comm.Work
				var err error
				if send {
					w, err = g.SendAsync(ctx, buf, peer)
				} else {
					w, err = g.RecvAsync(ctx, buf, peer)
				}
				if err != nil {
					return err
				}
				return w.Wait(ctx)
			case "batch":
				kind := comm.Irecv
				if send {
					kind = comm.Isend
				}
				w, err := g.BatchP2P(ctx, []comm.P2POp{{Kind: kind, Buf: buf, Peer: peer}})
				if err != nil {
					return err
				}
				return w.Wait(ctx)
			}
			if send {
				return g.Send(ctx, buf, peer)
			}
			return g.Recv(ctx, buf, peer)
		}
		for _, form := range forms {
			for i, c := range cases {
				call := fmt.Sprintf("%s %s (rank %d)", form, c.name, r)
				buf := c.recv
				if r == 0 {
					buf = c.sent
				}
				err := do(form, r == 0, buf)
				var me *comm.MismatchError
				if !errors.As(err, &me) || me.Rank != 0 || me.Peer != 1 {
					t.Errorf("%s returned %v, want a *comm.MismatchError naming sender 0 and receiver 1", call, err)
					continue
				}
				for _, w := range c.words {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not mention %q", call, err, w)
					}
				}
				// The pair still works, both ways.
				x := []int64{int64(100*i + r)}
				if err := do(form, r == 0, comm.I64(x)); err != nil {
					return fmt.Errorf("%s: the message after the mismatch: %w", call, err)
				}
				if err := do(form, r == 1, comm.I64(x)); err != nil {
					return fmt.Errorf("%s: the reply after the mismatch: %w", call, err)
				}
				if x[0] != int64(100*i) {
					t.Errorf("%s: after the mismatch, the round trip gave %d, want %d", call, x[0], 100*i)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWaitLeavesMidBatch: a waiter that drives a BatchP2P (work.drive) and
// whose own ctx ends in the middle of it must return the ctx's error
// without failing anything, and hand the batch over to a goroutine that
// completes it with no further Wait; later Waits, concurrent ones among
// them, return its outcome.
func TestWaitLeavesMidBatch(t *testing.T) {
	if worldSize(t) < 2 {
		t.Skip("needs at least 2 ranks")
	}
	err := runWorld(t, comm.Options{Timeout: 30 * time.Second}, func(ctx context.Context, g comm.Group) error {
		a, b, c := []int64{1, 2}, []float32{3, 4, 5}, []int64{6}
		switch g.Rank() {
		case 0:
			if err := g.Send(ctx, comm.I64(a), 1); err != nil {
				return err
			}
			// Rank 1's first Wait gives up before b leaves.
			if err := g.Recv(ctx, comm.I64(make([]int64, 1)), 1); err != nil {
				return err
			}
			if err := g.Send(ctx, comm.F32(b), 1); err != nil {
				return err
			}
			return g.Send(ctx, comm.I64(c), 1)
		case 1:
			ga, gb, gc := make([]int64, 2), make([]float32, 3), make([]int64, 1)
			w, err := g.BatchP2P(ctx, []comm.P2POp{{Kind: comm.Irecv, Buf: comm.I64(ga), Peer: 0}, {Kind: comm.Irecv, Buf: comm.F32(gb), Peer: 0}})
			if err != nil {
				return err
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err = w.Wait(short)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the first Wait returned %v, want an error wrapping context.DeadlineExceeded", err)
			}
			if err := g.Send(ctx, comm.I64([]int64{0}), 0); err != nil {
				return fmt.Errorf("Send after a Wait gave up: %w", err)
			}
			// c follows b: once c is here, b is too, and the handed-over
			// batch completes with nobody waiting.
			if err := g.Recv(ctx, comm.I64(gc), 0); err != nil {
				return err
			}
			select {
			case <-w.(*work).done:
			case <-time.After(10 * time.Second):
				t.Errorf("the batch did not complete after its waiter left")
			}
			errs := make(chan error, 2)
			for range 2 {
				go func() { errs <- w.Wait(ctx) }()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Errorf("a later Wait returned %v", err)
				}
			}
			if fmt.Sprint(ga, gb, gc) != fmt.Sprint(a, b, c) {
				t.Errorf("received %v %v %v, want %v %v %v", ga, gb, gc, a, b, c)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnwaitedWork: an async message nobody waits for still runs to its
// end. One that completes does so on the goroutine the controller starts
// for it (World.adopt); one that never can gives up at Options.Timeout,
// failing the world with its hang report, as a blocking call would.
func TestUnwaitedWork(t *testing.T) {
	if worldSize(t) < 2 {
		t.Skip("needs at least 2 ranks")
	}
	err := runWorld(t, comm.Options{Timeout: 30 * time.Second}, func(ctx context.Context, g comm.Group) error {
		x := []int64{42}
		switch g.Rank() {
		case 0:
			return g.Send(ctx, comm.I64(x), 1)
		case 1:
			got := make([]int64, 1)
			w, err := g.RecvAsync(ctx, comm.I64(got), 0)
			if err != nil {
				return err
			}
			select {
			case <-w.(*work).done:
			case <-time.After(10 * time.Second):
				return errors.New("the unwaited RecvAsync did not complete")
			}
			if got[0] != 42 {
				t.Errorf("the unwaited RecvAsync received %d, want 42", got[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var me int
	err = runWorld(t, comm.Options{Timeout: 200 * time.Millisecond}, func(ctx context.Context, g comm.Group) error {
		me = g.Rank()
		if me == 1 {
			if _, err := g.RecvAsync(ctx, comm.I64(make([]int64, 1)), 0); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done(): // the world fails
			return context.Cause(ctx)
		case <-time.After(20 * time.Second):
			return errors.New("the unwaited RecvAsync did not give up")
		}
	})
	var re *RunError
	var te *comm.TimeoutError
	if !errors.As(err, &re) || re.Rank != 1 || !errors.As(err, &te) || te.Op != comm.OpRecv || te.Peer != 0 {
		t.Fatalf("rank %d: Run returned %v, want a *RunError whose root cause is rank 1's *comm.TimeoutError in Recv from 0", me, err)
	}
}
