package local

import (
	"fmt"
	"time"

	"github.com/gotron/gotron/comm"
)

// timeoutError builds the hang report of a call that gave up waiting: what
// every other party had done. The caller holds c.m.mu.
func (c *call) timeoutError(cause error) *comm.TimeoutError {
	t := c.t
	e := &comm.TimeoutError{
		Group:       t.c.name,
		GlobalRanks: t.c.global,
		Rank:        t.members[c.party],
		GlobalRank:  t.worldRank(c.party),
		Op:          c.kind.String(),
		Seq:         c.seq,
		Peer:        -1,
		Waited:      time.Since(c.start),
		Cause:       cause,
	}
	if t.p2p {
		e.Peer = t.members[1-c.party]
	}
	for k := range t.parties() {
		if k == c.party {
			continue
		}
		wr := t.worldRank(k)
		ms := comm.MemberState{Rank: t.members[k], GlobalRank: wr, Status: comm.StatusNotArrived}
		failed, exited := c.w.rankStatus(wr)
		switch {
		case failed != nil:
			ms.Status, ms.Err = comm.StatusFailed, failed
		case c.m.args[k].present:
			ms.Status = comm.StatusArrived
		case exited:
			ms.Status = comm.StatusExited
		}
		if n, kind := t.issued[k].last(); n > 0 {
			ms.LastOp, ms.LastSeq = kind.String(), n-1
		}
		ms.Doing = c.w.doing(wr, t, c.seq)
		e.Members = append(e.Members, ms)
	}
	return e
}

// doing describes what world rank r is blocked in, unless it is the
// operation seq of table t itself.
func (w *World) doing(r int, t *table, seq uint64) string {
	rs := &w.ranks[r]
	rs.actMu.Lock()
	a := rs.act
	rs.actMu.Unlock()
	if !a.active || (a.tab == t && a.seq == seq) {
		return ""
	}
	return fmt.Sprintf("%s on group %s", describe(a.tab, a.kind, a.seq, a.party), a.tab.c.label())
}
