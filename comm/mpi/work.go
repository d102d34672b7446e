//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/gotron/gotron/comm"
)

// work is the comm.Work of issued calls running on a goroutine of their
// own.
type work struct {
	w    *World
	desc string // for hang reports while someone waits on it
	done chan struct{}
	err  error
}

// startWork runs cs on a new goroutine.
func (w *World) startWork(desc string, cs []*call) comm.Work {
	wk := &work{w: w, desc: desc, done: make(chan struct{})}
	go wk.run(cs)
	return wk
}

func (wk *work) run(cs []*call) {
	defer close(wk.done)
	defer func() {
		if v := recover(); v != nil {
			wk.err = &comm.PanicError{Rank: wk.w.rank, Value: v, Stack: debug.Stack()}
			wk.w.failLocal(wk.err)
		}
	}()
	wk.err = runAll(cs)
}

// runAll runs the calls of one Work, receives first: a send completes only
// once its receiver has replied, and the receiver's receive may be in a
// batch behind its own sends, so the other order could deadlock. A
// receive waits only for data that its sender posted when it issued the
// send. The error is that of the first failed call in ops order.
func runAll(cs []*call) error {
	errs := make([]error, len(cs))
	for i, c := range cs {
		if c.op == comm.OpRecv {
			errs[i] = c.run()
		}
	}
	for i, c := range cs {
		if c.op != comm.OpRecv {
			errs[i] = c.run()
		}
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		if len(cs) > 1 {
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
		return fmt.Errorf("comm: Wait for %s gave up: %w; the operation goes on and keeps its buffers", wk.desc, ctx.Err())
	}
}
