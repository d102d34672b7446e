//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/comm"
)

// work is the comm.Work of issued calls.
//
// Who runs the calls. Some goroutine must poll a Work's calls from issue
// to completion, whether or not anyone calls Wait: MPI moves a large
// message only while the processes at both ends poll (overlapping
// communication with computation depends on it), and the calls' context,
// Options.Timeout and a peer's failure must end them as they would a
// blocking call. A goroutine of the Work's own does that, but on the hot
// path it costs more than a small message: starting it wakes an idle OS
// thread, and handing the completion over to the goroutine blocked in
// Wait wakes another (on the 2-core development VM those threads take the
// core the peer rank polls on: a 4KB BatchP2P exchange took 20µs so, 9µs
// without).
//
// So the Work of messages is run by whoever claims it first (driving):
//
//   - Wait, finding it unclaimed, runs the calls in the waiter's goroutine:
//     the usual case when Wait follows the issue, as in the batched
//     exchanges of the pipeline schedules;
//   - else the controller, at its first poll adoptAfter or more after the
//     issue, starts the Work's goroutine (World.adopt): the case of a Work
//     issued to overlap with computation and waited for later, or never.
//     The controller polls at least every ctlMaxPoll (control.go), and its
//     polls drive MPI's progress until then.
//
// A waiter that drives must still return when its own ctx ends while the
// operation goes on: it stops in the middle of a call's wait (call.stop,
// errStopped), gives up the claim, and starts the Work's goroutine, which
// claims it and carries on. Only messages can be resumed so (their bodies
// only await requests posted at issue); the Work of a collective runs on a
// goroutine of its own from the start (resumable false).
type work struct {
	w    *World
	desc blocker // for hang reports while someone waits on it
	cs   []*call

	resumable bool        // every call is a message: a waiter may drive
	issued    time.Time   // when, for adopt
	driving   atomic.Bool // someone has claimed the calls (cleared to hand them over)
	next      int         // cs[:next] have completed (owned by the driver)
	errs      []error     // their errors (owned by the driver)

	done chan struct{} // closed once every call has completed
	err  error
}

// startWork returns the Work of the issued calls cs. A collective's
// goroutine starts at once; messages are left for a waiter to claim, and
// for the controller to adopt if none does (adopt).
func (w *World) startWork(desc blocker, cs []*call) comm.Work {
	wk := &work{w: w, desc: desc, cs: cs, resumable: true, errs: make([]error, len(cs)),
		issued: time.Now(), done: make(chan struct{})}
	for _, c := range cs {
		if c.peer < 0 {
			wk.resumable = false
		}
	}
	if wk.resumable {
		w.workMu.Lock()
		adopting := w.adopting
		if adopting {
			w.unclaimed = append(w.unclaimed, wk)
		}
		w.workMu.Unlock()
		if adopting {
			return wk
		}
	}
	go wk.background()
	return wk
}

// background runs the calls, unless someone else has claimed them.
func (wk *work) background() {
	if wk.driving.CompareAndSwap(false, true) {
		wk.drive(nil)
	}
}

// drive runs the calls left, one after the other, in ops order, and
// completes the Work. The caller holds the claim. When stop closes first
// (a driving waiter's ctx ended), drive hands the calls over to a new
// goroutine and returns false.
//
// No call waits for another of the batch, nor for any later action of a
// peer: every MPI request of every call was posted when the batch was
// issued, a receive waits only for data its sender posted when it issued
// the send, and a send only for the note its receiver sent when it issued
// the receive and for MPI to move the data, which any poll of the
// receiving process drives (p2p.go). So the order cannot deadlock, and ops
// with different peers do not wait for each other; while one call is
// polled, MPI progresses the others. The error is that of the first failed
// call in ops order.
func (wk *work) drive(stop <-chan struct{}) (finished bool) {
	defer func() {
		if v := recover(); v != nil {
			wk.err = &comm.PanicError{Rank: wk.w.rank, Value: v, Stack: debug.Stack()}
			wk.w.failLocal(wk.err)
			close(wk.done)
			finished = true
		}
	}()
	for ; wk.next < len(wk.cs); wk.next++ {
		c := wk.cs[wk.next]
		c.stop = stop
		err := c.run()
		if err == errStopped {
			wk.driving.Store(false)
			go wk.background()
			return false
		}
		wk.errs[wk.next] = err
	}
	wk.err = firstErr(wk.errs)
	close(wk.done)
	return true
}

// firstErr returns the first error of a Work's calls, in ops order.
func firstErr(errs []error) error {
	for i, err := range errs {
		if err == nil {
			continue
		}
		if len(errs) > 1 {
			return fmt.Errorf("BatchP2P ops[%d]: %w", i, err)
		}
		return err
	}
	return nil
}

// Wait waits for the calls; ctx bounds only this wait, except that when
// the World has failed it returns the calls' own error.
func (wk *work) Wait(ctx context.Context) error {
	select {
	case <-wk.done:
		return wk.err
	default:
	}
	id := wk.w.block(wk.desc)
	defer wk.w.unblock(id)
	if wk.resumable && wk.driving.CompareAndSwap(false, true) && wk.drive(ctx.Done()) {
		return wk.err
	}
	select {
	case <-wk.done:
		return wk.err
	case <-ctx.Done():
		if wk.w.failure() != nil {
			// The world failed, which cancels Run's context too: the
			// operation ends within one poll with the *comm.PeerError.
			<-wk.done
			return wk.err
		}
		return fmt.Errorf("comm: Wait for %s gave up: %w; the operation goes on and keeps its buffers", wk.desc.doing(), ctx.Err())
	}
}

// adoptAfter is how long a Work may wait for its waiter to claim it before
// the controller starts its goroutine.
const adoptAfter = 50 * time.Microsecond

// adopt starts the goroutine of every Work issued at least adoptAfter ago
// (every Work, if all) that nobody has claimed, and forgets those claimed.
// It reports whether it found any Work (seen: async messages are being
// issued), and whether one too young to adopt is left (young), for the
// controller's pacing. The controller calls it at each poll.
func (w *World) adopt(all bool) (seen, young bool) {
	w.workMu.Lock()
	defer w.workMu.Unlock()
	if len(w.unclaimed) == 0 {
		return false, false
	}
	now := time.Now()
	left := w.unclaimed[:0]
	for _, wk := range w.unclaimed {
		switch {
		case wk.driving.Load():
		case !all && now.Sub(wk.issued) < adoptAfter:
			left = append(left, wk)
		case wk.driving.CompareAndSwap(false, true):
			go wk.drive(nil)
		}
	}
	clear(w.unclaimed[len(left):])
	w.unclaimed = left
	return true, len(left) > 0
}

// stopAdopting adopts every Work left, when the controller stops: from now
// on startWork starts each Work's goroutine itself.
func (w *World) stopAdopting() {
	w.workMu.Lock()
	w.adopting = false
	w.workMu.Unlock()
	w.adopt(true)
}
