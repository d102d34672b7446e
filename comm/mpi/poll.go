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
// The pause grows with the time already waited, in three phases, so that
// short operations are seen complete at once and long ones do not spin a
// core:
//
//  1. busy, for the first busyFor: MPI_Test back to back, with no pause
//     at all. A small message's reply arrives within a few microseconds,
//     and any pause costs about as much as the message (measured on the
//     2-core development VM: 4KB ping-pong 14µs with a sched_yield between
//     polls, 12µs without). Only when this node's ranks are no more than
//     its CPUs (World.busy): with more ranks than cores, the peer may be
//     waiting for this very core.
//  2. yield, until yieldFor: sched_yield(2) between polls, so that a peer
//     rank waiting for this core can run. The goroutine yields its P
//     (runtime.Gosched) only every goschedEvery: a Gosched puts it on the
//     global run queue and wakes an idle thread to take it (a futex wake
//     and sleep, several microseconds, and the other core's time, which the
//     peer rank needs: with a Gosched at every poll, a 4KB ping-pong took
//     18µs instead of 12µs). Other goroutines get the P at least that
//     often after the busy phase; the scheduler's preemption would give
//     it to them within 10ms anyway.
//  3. sleep: one eighth of the time waited so far, between minSleep and
//     maxSleep. The cost is at most maxSleep of added latency on a long
//     operation (about 1/16 of it on average on a shorter one), and a
//     waiting rank uses a small fraction of a core. (One 32nd measured no
//     better on 1MB and 16MB ping-pongs, whose noise is larger.)
//
// Go's timers cannot sleep less than about a millisecond on some kernels
// (measured ~1.1ms on the VMs gotron is developed on), so pauses shorter
// than timerFloor are a nanosleep(2) of the OS thread (~0.1ms there), with
// the channels checked after it; longer ones wait on a timer and the
// channels together.

const (
	busyFor      = 30 * time.Microsecond
	yieldFor     = 200 * time.Microsecond
	goschedEvery = 50 * time.Microsecond
	minSleep     = 20 * time.Microsecond
	maxSleep     = time.Millisecond
	timerFloor   = time.Millisecond

	// noPause is backoff's answer during the busy phase: poll again at
	// once.
	noPause = time.Duration(-1)
)

// backoff returns the pause of a waiter that has waited for elapsed and may
// poll without pausing for its first busy: noPause during busy, 0 (yield)
// until yieldFor, then elapsed/8 within [minSleep, maxSleep].
func backoff(elapsed, busy time.Duration) time.Duration {
	switch {
	case elapsed < busy:
		return noPause
	case elapsed < yieldFor:
		return 0
	}
	return min(max(elapsed/8, minSleep), maxSleep)
}

// busyPolling returns how long a wait may poll without pausing (World.busy):
// busyFor when this node runs no more ranks (local) than the CPUs this
// process may use, else 0. A rank bound to a single core (mpirun's
// --bind-to core) counts as sharing it, the cautious reading.
func busyPolling(local int) time.Duration {
	if local <= runtime.NumCPU() {
		return busyFor
	}
	return 0
}

// sleeper pauses a polling loop with a reusable timer.
type sleeper struct {
	t         *time.Timer
	lastSched time.Time // the last runtime.Gosched of the yield phase
}

// sleep pauses for about d, or until one of a, b, c, e (any may be nil) is
// ready, and reports whether a channel ended it. A d of 0 only yields; a
// negative d only looks at the channels.
func (s *sleeper) sleep(d time.Duration, a, b, c, e <-chan struct{}) bool {
	if d < timerFloor {
		switch {
		case d == 0:
			// Yield to other processes (on a machine with more runnable
			// processes than cores the peer rank may be waiting for this
			// core), and now and then to other goroutines.
			if now := time.Now(); s.lastSched.IsZero() {
				s.lastSched = now
			} else if now.Sub(s.lastSched) >= goschedEvery {
				s.lastSched = now
				runtime.Gosched()
			}
			syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		case d > 0:
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
		case <-e:
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
	case <-e:
	case <-s.t.C:
		return false
	}
	s.t.Stop()
	return true
}
