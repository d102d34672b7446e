package train

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gotron/gotron/comm"
)

// Stop carries a request to end training early, made by a signal handler
// (gotron train installs one), to the ranks of this process. The ranks
// agree at the end of every iteration (a maximum over the world group), so
// a signal that reaches one process of an mpirun job stops every rank at
// the same iteration; they save (with --save) and return.
type Stop struct{ sig atomic.Int32 }

// Request asks the ranks to stop after their current iteration because
// of sig. Later requests keep the first signal.
func (s *Stop) Request(sig syscall.Signal) { s.sig.CompareAndSwap(0, int32(sig)) }

// Requested returns the signal of the first request, if any.
func (s *Stop) Requested() (syscall.Signal, bool) {
	v := s.sig.Load()
	return syscall.Signal(v), v != 0
}

// ExitReason says why a run ended before --train-iters.
type ExitReason struct {
	// Signal is the signal that stopped the run (0: none).
	Signal syscall.Signal
	// Interval is set when --exit-interval ended the run, Duration when
	// --exit-duration-in-mins did.
	Interval, Duration bool
}

// String describes the reason for the log ("SIGTERM", "--exit-interval 5").
func (r ExitReason) String() string {
	switch {
	case r.Signal != 0:
		return signalName(r.Signal)
	case r.Interval:
		return "--exit-interval"
	case r.Duration:
		return "--exit-duration-in-mins"
	}
	return ""
}

// signalName returns "SIGINT", "SIGTERM", or the signal's number.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// Reason codes exchanged between the ranks: the largest wins, so a signal
// (its number plus signalCode) outranks the duration limit.
const (
	durationCode = 1
	signalCode   = 2
)

// exitReason returns why the run must stop after the current iteration,
// the same on every rank: --exit-interval is decided locally (every rank
// has the same iteration); a stop request and --exit-duration-in-mins are
// agreed over the world group (a signal may reach one process, clocks
// differ), which costs one 8-byte all-reduce per iteration when either can
// apply.
func (t *trainer) exitReason(ctx context.Context, stop *Stop, started time.Time) (ExitReason, bool, error) {
	var r ExitReason
	if stop != nil || t.a.ExitDurationInMins > 0 {
		code := []int64{0}
		if t.a.ExitDurationInMins > 0 && time.Since(started).Minutes() > t.a.ExitDurationInMins {
			code[0] = durationCode
		}
		if stop != nil {
			if sig, ok := stop.Requested(); ok {
				code[0] = signalCode + int64(sig)
			}
		}
		if err := t.groups.World.AllReduce(ctx, comm.I64(code), comm.Max); err != nil {
			return r, false, fmt.Errorf("agreeing whether to stop: %w", err)
		}
		switch {
		case code[0] >= signalCode:
			r.Signal = syscall.Signal(code[0] - signalCode)
			return r, true, nil
		case code[0] == durationCode:
			r.Duration = true
			return r, true, nil
		}
	}
	if t.a.ExitInterval > 0 && t.iteration%t.a.ExitInterval == 0 && t.iteration < t.a.TrainIters {
		r.Interval = true
		return r, true, nil
	}
	return r, false, nil
}
