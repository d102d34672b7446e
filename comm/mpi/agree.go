//go:build mpi

package mpi

import (
	"time"

	"github.com/gotron/gotron/comm"
)

// causeWait bounds the wait for the failure notice of the rank the exit
// agreement names, when it has not arrived yet.
const causeWait = 10 * time.Second

// agree ends a Run: the ranks swap, with one MPI_Iallgather on ctl, the
// first failure each knows of (its rank and when it happened at its
// origin), and every rank names the same root cause, the earliest of them
// (ties to the lower rank; clocks of different nodes are compared as they
// are). err is this rank's fn error.
func (w *World) agree(err error) error {
	var m cmem
	mine, all := m.int64s(3), m.int64s(3*w.size)
	w.mu.Lock()
	if w.first != nil {
		mine[0], mine[1], mine[2] = 1, int64(w.first.FailedRank), w.firstAt
	}
	w.mu.Unlock()
	var q request
	reached := iallgather(addr(comm.I64(mine)), 3, addr(comm.I64(all)), 3, tI64, w.ctl, &q) == nil
	if reached {
		var s sleeper
		start := time.Now()
		for {
			if ok, err := q.test("MPI_Iallgather"); ok {
				reached = err == nil
				break
			}
			if w.timeout > 0 && time.Since(start) > w.timeout {
				reached = false
				break
			}
			s.sleep(backoff(time.Since(start), 0), nil, nil, nil, nil)
		}
	}
	w.mu.Lock()
	w.reached = reached
	w.mu.Unlock()
	if !reached {
		// all may still be written by MPI: leave m allocated.
		return w.unreached(err)
	}
	root, at := -1, int64(0)
	for r := range w.size {
		f, t := int(all[3*r+1]), all[3*r+2]
		if all[3*r] == 1 && (root < 0 || t < at || t == at && f < root) {
			root, at = f, t
		}
	}
	m.free()
	switch {
	case root < 0 && err == nil:
		return nil
	case root < 0:
		return &RunError{Rank: w.rank, Err: err, ThisRank: w.rank, ThisErr: err}
	}
	return &RunError{Rank: root, Err: w.causeOf(root), ThisRank: w.rank, ThisErr: err}
}

// causeOf returns world rank r's failure, waiting (at most causeWait) for
// its notice to arrive.
func (w *World) causeOf(r int) error {
	var s sleeper
	start := time.Now()
	for {
		ev := *w.events.Load()
		if err, _ := w.rankState(r); err != nil {
			return err
		}
		if time.Since(start) > causeWait {
			return &RemoteError{Rank: r, Msg: "failed (its error message did not arrive)"}
		}
		s.sleep(causeWait, ev, nil, nil, nil)
	}
}

// unreached is Run's error when not every rank came back to agree.
func (w *World) unreached(err error) error {
	e := &RunError{Rank: w.rank, Err: err, ThisRank: w.rank, ThisErr: err, Unreached: true}
	if pe := w.failure(); pe != nil {
		e.Rank, e.Err = pe.FailedRank, pe.Cause
	}
	if e.Err == nil {
		e.Err = &RemoteError{Rank: -1, Msg: "some rank did not return from its Run function within Options.Timeout"}
	}
	return e
}
