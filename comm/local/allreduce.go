package local

import (
	"sync/atomic"

	"github.com/gotron/gotron/comm"
)

// arBlockBytes is the size of the blocks the parties of an AllReduce claim:
// large enough that claiming costs little next to reducing, small enough
// that the last block claimed leaves the parties little imbalance. A 64 KiB
// block of float32 is reduced in a few microseconds.
const arBlockBytes = 64 << 10

// arShare is how the parties of one AllReduce share its blocks: a claim
// counter per chunk, and the number of elements reduced so far.
type arShare struct {
	next    []paddedCount // per chunk: blocks claimed
	reduced atomic.Int64  // elements reduced, added by each party once
}

// paddedCount is a counter alone in its cache line, so parties claiming
// blocks of different chunks do not contend.
type paddedCount struct {
	atomic.Int64
	_ [56]byte
}

func newARShare(parties int) arShare { return arShare{next: make([]paddedCount, parties)} }

func (s *arShare) reset() {
	for k := range s.next {
		s.next[k].Store(0)
	}
	s.reduced.Store(0)
}

// allReduce does this party's share of a ready AllReduce.
//
// The buffers, of l elements, are cut into one chunk per party,
// chunk k = [l·k/n, l·(k+1)/n), and each chunk into blocks of arBlockBytes.
// Party p reduces the blocks of chunk p first, then those left in chunks
// p+1, p+2, … (mod n), claiming one block at a time from the chunk's
// counter. A block is reduced and written into every party's buffer in one
// pass (reduce-scatter and all-gather fused, reading each input once while
// the sums are in registers). Every element is reduced by comm.Reduce over
// the parties in rank order, whichever party claims its block, so the
// result is bitwise the same however the work was shared.
//
// Parties that run in parallel each reduce about their own chunk, as a
// fixed split would; a party that is slow to start (descheduled, or still
// waking up) has its blocks done by the others instead of making them wait.
// The party that completes the last element marks the meet done, so the
// others may leave before a late party has even looked: it finds nothing to
// claim and touches no buffer.
func (c *call) allReduce() {
	m := c.m
	as := m.args
	p, n := c.party, len(as)
	me := &as[p]
	l := me.a.Len()
	if n == 1 || l == 0 {
		return
	}
	bs := max(1, arBlockBytes/me.a.DType().Size())
	bufs := c.scratch(n)
	done := 0
	for i := range n {
		k := (p + i) % n
		lo, hi := l*k/n, l*(k+1)/n
		for {
			blo := lo + int(m.share.next[k].Add(1)-1)*bs
			if blo >= hi {
				break
			}
			bhi := min(blo+bs, hi)
			for j := range as {
				bufs[j] = as[j].a.Slice(blo, bhi)
			}
			comm.Reduce(me.rop, bufs, bufs)
			done += bhi - blo
		}
	}
	if done > 0 && m.share.reduced.Add(int64(done)) == int64(l) {
		m.finishEarly(p)
	}
}
