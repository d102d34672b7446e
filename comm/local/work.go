package local

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

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

// finishAll finishes published calls: each waits for its peers, does its
// share and departs on its own, in no order between them (a batch's ops
// with different peers must not wait for each other: a rank blocked on one
// peer would otherwise hold up the op another peer's single send waits
// for, and chains of such waits through a pipeline deadlock); then every
// call waits until it is done. A call that cannot become ready leaves
// the others to finish or fail on their own.
func finishAll(cs []call) error {
	errs := make([]error, len(cs))
	share := func(i int) {
		c := &cs[i]
		if err := c.awaitReady(); err != nil {
			errs[i] = err
			return
		}
		if err := c.agree(); err != nil {
			errs[i] = err
		} else {
			c.compute()
		}
		c.depart()
		c.gone = true
	}
	if len(cs) == 1 {
		share(0)
	} else {
		var wg sync.WaitGroup
		for i := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if v := recover(); v != nil {
						c := &cs[i]
						r := c.t.worldRank(c.party)
						errs[i] = &comm.PanicError{Rank: r, Value: v, Stack: debug.Stack()}
						c.w.fail(r, errs[i])
					}
				}()
				share(i)
			}()
		}
		wg.Wait()
	}
	for i := range cs {
		if cs[i].gone {
			cs[i].awaitDone()
		}
	}
	for i, err := range errs {
		if err != nil {
			if len(cs) > 1 {
				err = fmt.Errorf("BatchP2P ops[%d]: %w", i, err)
			}
			return err
		}
	}
	return nil
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
