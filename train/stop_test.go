package train

import (
	"context"
	"syscall"
	"testing"
)

// TestStopSavesAndResumesBitForBit: a stop requested (as a signal handler
// does) before the first iteration ends ends every rank after it, with a
// checkpoint; --exit-interval 3 stops at iteration 3 with one. Resuming
// each gives bitwise the losses of a run that never stopped.
func TestStopSavesAndResumesBitForBit(t *testing.T) {
	a := mockArgs(6)
	a.WorldSize = 2
	a.Model.HiddenDropout = 0.1
	full, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(*Args, *Options)
		at   int
		want ExitReason
	}{
		{"signal", func(_ *Args, o *Options) { o.Stop = &Stop{}; o.Stop.Request(syscall.SIGTERM) }, 1, ExitReason{Signal: syscall.SIGTERM}},
		{"exit interval", func(a *Args, _ *Options) { a.ExitInterval = 3 }, 3, ExitReason{Interval: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			first, o := a, Options{}
			first.Save = dir
			c.set(&first, &o)
			res, err := Run(context.Background(), first, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Exit == nil || *res.Exit != c.want || len(res.Losses) != c.at || res.Saved != c.at {
				t.Fatalf("exit %v after %d iterations, saved %d; want %v after %d with a checkpoint", res.Exit, len(res.Losses), res.Saved, c.want, c.at)
			}
			second := a
			second.Load = dir
			res, err = Run(context.Background(), second, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.StartIteration != c.at || res.Exit != nil {
				t.Fatalf("resumed at %d (exit %v), want %d", res.StartIteration, res.Exit, c.at)
			}
			for i, l := range res.Losses {
				if l != full.Losses[c.at+i] {
					t.Errorf("iteration %d: resumed loss %.9f, uninterrupted %.9f", c.at+i+1, l, full.Losses[c.at+i])
				}
			}
		})
	}
}

// TestExitDuration: --exit-duration-in-mins stops after the first
// iteration that ends past the limit (a limit already passed: the first)
// and saves.
func TestExitDuration(t *testing.T) {
	a := mockArgs(5)
	a.Save, a.ExitDurationInMins = t.TempDir(), 1e-9
	res, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit == nil || !res.Exit.Duration || len(res.Losses) != 1 || res.Saved != 1 {
		t.Fatalf("exit %v after %d iterations, saved %d", res.Exit, len(res.Losses), res.Saved)
	}
}
