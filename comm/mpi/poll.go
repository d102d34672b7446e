//go:build mpi

package mpi

import (
	"runtime"
	"syscall"
	"time"
)

// Waiting on MPI. A nonblocking MPI operation completes only while some
// thread calls into MPI (Open MPI has no progress thread for them), and a
// blocking MPI_Wait would hold an OS thread in a busy loop that no context
// can interrupt. So every wait here polls: MPI_Test, then a pause, then
// MPI_Test again, watching the context, the deadline and the World's
// notices between polls. This is the one place in gotron where a timed poll
// stands in for a wake-up: MPI offers no file descriptor or callback to
// wait on.
//
// The pause grows with the time already waited, so that short operations
// finish with little delay and long ones do not spin a core: the waiter
// yields for its first spinFor (runtime.Gosched, then sched_yield(2) so a
// peer rank waiting for this core can run: ranks often outnumber cores),
// then sleeps one eighth of
// the time it has waited so far, between minSleep and maxSleep. The cost is
// at most maxSleep of added latency on a long operation (about 1/8 of it on
// a shorter one), and a waiting rank uses a small fraction of a core.
//
// Go's timers cannot sleep less than about a millisecond on some kernels
// (measured ~1.1ms on the VMs gotron is developed on), so pauses shorter
// than timerFloor are a nanosleep(2) of the OS thread (~0.1ms there), with
// the channels checked after it; longer ones wait on a timer and the
// channels together.

const (
	spinFor    = 200 * time.Microsecond
	minSleep   = 20 * time.Microsecond
	maxSleep   = time.Millisecond
	timerFloor = time.Millisecond
)

// backoff returns the pause of a waiter that has waited for elapsed: 0
// (yield) during spinFor, then elapsed/8 within [minSleep, maxSleep].
func backoff(elapsed time.Duration) time.Duration {
	if elapsed < spinFor {
		return 0
	}
	return min(max(elapsed/8, minSleep), maxSleep)
}

// sleeper pauses a polling loop with a reusable timer.
type sleeper struct{ t *time.Timer }

// sleep pauses for about d, or until one of a, b, c (any may be nil) is
// ready, and reports whether a channel ended it. A d of 0 only yields.
func (s *sleeper) sleep(d time.Duration, a, b, c <-chan struct{}) bool {
	if d < timerFloor {
		if d <= 0 {
			// Yield to other goroutines, then to other processes: on a
			// machine with more runnable processes than cores the peer
			// rank may be waiting for this core.
			runtime.Gosched()
			syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		} else {
			ts := syscall.NsecToTimespec(int64(d))
			syscall.Nanosleep(&ts, nil)
		}
		select {
		case <-a:
			return true
		case <-b:
			return true
		case <-c:
			return true
		default:
			return false
		}
	}
	if s.t == nil {
		s.t = time.NewTimer(d)
	} else {
		s.t.Reset(d)
	}
	select {
	case <-a:
	case <-b:
	case <-c:
	case <-s.t.C:
		return false
	}
	s.t.Stop()
	return true
}
