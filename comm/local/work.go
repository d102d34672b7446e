package local

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/gotron/gotron/comm"
)

// work is the comm.Work of published calls finishing on their own
// goroutine.
type work struct {
	w     *World
	done  chan struct{}
	err   error
	calls []call
}

func startWork(w *World, calls []call) *work {
	wk := &work{w: w, done: make(chan struct{}), calls: calls}
	go wk.run()
	return wk
}

func (wk *work) run() {
	defer close(wk.done)
	defer func() {
		if v := recover(); v != nil {
			c := &wk.calls[0]
			r := c.t.worldRank(c.party)
			wk.err = &comm.PanicError{Rank: r, Value: v, Stack: debug.Stack()}
			c.w.fail(r, wk.err)
		}
	}()
	wk.err = finishAll(wk.calls)
}

// finishAll finishes published calls in three sweeps: wait for each to be
// ready and do its share (abandoning the rest if one cannot be), then wait
// until each is done. No sweep waits on work a peer can only do after its
// own later sweep, so batches that cross cannot deadlock.
func finishAll(cs []call) error {
	var first error
	note := func(i int, err error) {
		if first != nil {
			return
		}
		if len(cs) > 1 {
			err = fmt.Errorf("BatchP2P ops[%d]: %w", i, err)
		}
		first = err
	}
	for i := range cs {
		c := &cs[i]
		if err := c.awaitReady(); err != nil {
			note(i, err)
			for j := i + 1; j < len(cs); j++ {
				cs[j].abandon()
			}
			break
		}
		if err := c.agree(); err != nil {
			note(i, err)
		} else {
			c.compute()
		}
		c.depart()
		c.gone = true
	}
	for i := range cs {
		if cs[i].gone {
			cs[i].awaitDone()
		}
	}
	return first
}

// Wait implements comm.Work. ctx bounds only this wait, except when the
// world has failed: the failure cancels Run's context too, and Wait then
// returns the operation's own error (a *comm.PeerError unless it completed
// first), which every waiter is woken to report at once.
func (wk *work) Wait(ctx context.Context) error {
	select {
	case <-wk.done:
		return wk.err
	default:
	}
	select {
	case <-wk.done:
		return wk.err
	case <-ctx.Done():
		if wk.w.failure() != nil {
			<-wk.done
			return wk.err
		}
		return fmt.Errorf("local: Wait for %s gave up: %w; the operation goes on and keeps its buffers", wk.describe(), ctx.Err())
	}
}

func (wk *work) describe() string {
	if len(wk.calls) == 0 {
		return "an empty BatchP2P"
	}
	c := &wk.calls[0]
	s := fmt.Sprintf("%s on group %s", c.describe(), c.t.c.label())
	if len(wk.calls) > 1 {
		s = fmt.Sprintf("BatchP2P of %d ops (first %s)", len(wk.calls), s)
	}
	return s
}
