//go:build mpi

package mpi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/gotron/gotron/comm"
)

// call is one operation of one rank, from issue to completion.
//
// A collective is issued by posting its header exchange on hdr (in call
// order, in the caller's goroutine); it then runs: wait for every member's
// header, check that they agree, and do its data phases (body). A message
// is issued by posting its requests (p2p.go), and runs its body. A
// blocking method runs the call in the caller's goroutine; an async one
// runs it in a goroutine of its own, or, for messages, in the goroutine
// that waits for it (work.go).
type call struct {
	g        *group
	op       string // a comm.Op… name
	seq      uint64 // the group's collective number, or the pair's message number
	peer     int    // the peer's group rank for Send and Recv; -1 for collectives
	ctx      context.Context
	start    time.Time
	deadline time.Time // zero: none

	pin  runtime.Pinner
	mem  cmem
	reqs []*request  // every request posted
	own  [2]request  // the first two, kept in the call: no allocation each
	ownp [4]*request // the backing of reqs up to four
	leak bool        // a request may still be pending: see World.keep

	hdr  header
	hdrs []int64 // every member's header, hdrLen each (C memory)
	hreq *request
	det  detail // arguments, for mismatch messages
	t1   ticket // the turn to issue on d1
	t2   ticket // the turn to issue on d2

	body func(*call) error
	stop <-chan struct{} // closed when the goroutine running the call leaves it (work.drive)

	msg    comm.Buffer // a Send's or Recv's buffer
	theirs []int64     // a Send's copy of its receiver's note (C memory)

	nexited int64        // World.nexited at the last look for exited members
	cleared map[int]bool // exited members known to have issued this call
}

// ticket is a call's turn to issue a data phase on one communicator: it
// may issue once prev is closed, and closes mine once it has (or never
// will).
type ticket struct {
	prev, mine chan struct{}
	done       bool
}

func (t *ticket) release() {
	if t.mine != nil && !t.done {
		close(t.mine)
		t.done = true
	}
}

// issue numbers a collective and posts its header exchange. uses1 and uses2
// say whether its body issues on d1 and d2.
func (g *group) issue(ctx context.Context, h header, det detail, uses1, uses2 bool) (*call, error) {
	c := &call{g: g, op: kindName(h[hKind]), peer: -1, ctx: ctx, start: time.Now(), hdr: h, det: det}
	g.mu.Lock()
	c.seq = g.seq
	g.seq++
	g.lastOp = c.op
	broken := g.broken
	if uses1 {
		c.t1 = ticket{prev: g.tail1, mine: make(chan struct{})}
		g.tail1 = c.t1.mine
	}
	if uses2 {
		c.t2 = ticket{prev: g.tail2, mine: make(chan struct{})}
		g.tail2 = c.t2.mine
	}
	g.mu.Unlock()
	c.setDeadline()
	if err := c.usable(broken); err != nil {
		c.finish()
		return nil, err
	}
	mine := c.mem.int64s(hdrLen)
	copy(mine, h[:])
	c.hdrs = c.mem.int64s(hdrLen * len(g.global))
	c.hreq = c.req()
	if err := iallgather(addr(comm.I64(mine)), hdrLen, addr(comm.I64(c.hdrs)), hdrLen, tI64, g.hdr, c.hreq); err != nil {
		err = c.mpiFailed(err)
		c.finish()
		return nil, err
	}
	return c, nil
}

func (c *call) setDeadline() {
	if t := c.g.w.timeout; t > 0 {
		c.deadline = c.start.Add(t)
	}
}

// usable returns the error of a call issued on a failed world or a broken
// group.
func (c *call) usable(broken error) error {
	if pe := c.g.w.failure(); pe != nil {
		return c.peerError(pe)
	}
	if broken != nil {
		return fmt.Errorf("comm: %s on group %s at rank %d: the group is unusable after an earlier error: %w",
			c.describe(), c.g.label(), c.g.rank, broken)
	}
	return nil
}

// run completes an issued call. When its wait is stopped (c.stop), it
// returns errStopped and the call stays issued: a message's run may be
// called again, and resumes where it was (a message's body only awaits
// requests posted at issue, so it may start over).
func (c *call) run() (err error) {
	defer func() {
		if err != errStopped {
			c.finish()
		}
	}()
	if c.hdrs != nil {
		if err := c.await(c.hreq, "MPI_Iallgather"); err != nil {
			return err
		}
		if err := c.agree(); err != nil {
			return err
		}
	}
	if c.body != nil {
		return c.body(c)
	}
	return nil
}

// runBlocking runs the call in the caller's goroutine, recording what the
// process is blocked in for hang reports.
func (c *call) runBlocking() error {
	id := c.g.w.block(c)
	defer c.g.w.unblock(id)
	return c.run()
}

// finish releases the call's turns and memory.
func (c *call) finish() {
	c.t1.release()
	c.t2.release()
	if c.leak {
		c.g.w.keep(c)
		return
	}
	c.pin.Unpin()
	c.mem.free()
}

// req returns a new request of the call. (MPI reads and writes a request
// handle only during a call and never keeps its address, so the handle
// may live in the call's Go memory unpinned, as every request's does.)
func (c *call) req() *request {
	var q *request
	if n := len(c.reqs); n < len(c.own) {
		q = &c.own[n]
	} else {
		q = &request{}
	}
	if c.reqs == nil {
		c.reqs = c.ownp[:0]
	}
	c.reqs = append(c.reqs, q)
	return q
}

// settled reports whether every request of the call has completed.
func (c *call) settled() bool {
	for _, q := range c.reqs {
		if !q.done {
			if ok, _ := q.test("MPI_Test"); !ok {
				return false
			}
		}
	}
	return true
}

// phase waits for the call's turn on t, issues one nonblocking MPI
// operation with start, and waits for it to complete.
func (c *call) phase(t *ticket, name string, start func(q *request) error) error {
	if err := c.wait(t.prev, nil); err != nil {
		return err
	}
	if err := c.usable(c.g.brokenErr()); err != nil {
		return err
	}
	q := c.req()
	err := start(q)
	t.release()
	if err != nil {
		q.done = true
		return c.mpiFailed(err)
	}
	return c.await(q, name)
}

// await waits for one request.
func (c *call) await(q *request, name string) error {
	if ok, err := q.test(name); ok && err == nil {
		return nil // already complete, as a message's note usually is
	}
	return c.wait(nil, func() (bool, error) { return q.test(name) })
}

// wait polls test until it reports completion (or, when test is nil, waits
// for wake to close), and gives up when the world fails, a member the call
// needs has returned from Run without issuing it, or the context or the
// deadline ends (see poll.go for the pacing). When c.stop closes first, it
// returns errStopped and leaves the call as it is, to be waited for again.
func (c *call) wait(wake <-chan struct{}, test func() (bool, error)) error {
	w := c.g.w
	var s sleeper
	begin := time.Now()
	for {
		ev := *w.events.Load()
		if test != nil {
			if done, err := test(); done {
				if err != nil {
					return c.mpiFailed(err)
				}
				return nil
			}
		} else {
			select {
			case <-wake:
				return nil
			default:
			}
		}
		if pe := w.failure(); pe != nil {
			c.leak = true
			return c.peerError(pe)
		}
		if pe := c.hopeless(); pe != nil {
			c.leak = true
			w.failFor(pe.FailedRank, pe.Cause)
			return c.peerError(w.failure())
		}
		if err := c.ctx.Err(); err != nil {
			return c.giveUp(err)
		}
		now := time.Now()
		if !c.deadline.IsZero() && !now.Before(c.deadline) {
			return c.giveUp(comm.ErrTimeout)
		}
		d := time.Hour
		if test != nil {
			d = backoff(now.Sub(begin), w.busy)
		}
		if !c.deadline.IsZero() {
			d = min(d, c.deadline.Sub(now))
		}
		select {
		case <-c.stop:
			return errStopped
		default:
		}
		s.sleep(d, wake, ev, c.ctx.Done(), c.stop)
	}
}

// errStopped is what a wait returns when its call's stop channel closes:
// the waiter driving the call has left (work.drive), and the call goes on.
var errStopped = errors.New("mpi: the driver stopped waiting (not an error of the call)")

// giveUp ends a wait cut short by cause (comm.ErrTimeout or the context's
// error): the hang report, which also fails the world so that the peers do
// not wait for this rank forever.
func (c *call) giveUp(cause error) error {
	c.leak = true
	if pe := c.g.w.failure(); pe != nil {
		// The world failed meanwhile (and cancelled the Run context).
		return c.peerError(pe)
	}
	e := c.timeoutError(cause)
	c.g.breakWith(e)
	c.g.w.failLocal(e)
	return e
}

// mpiFailed reports an error returned by MPI itself.
func (c *call) mpiFailed(err error) error {
	c.leak = true
	err = fmt.Errorf("comm: %s on group %s at rank %d: %w", c.describe(), c.g.label(), c.g.rank, err)
	c.g.breakWith(err)
	return err
}

// peerError reports the world's failure pe as seen by this call.
func (c *call) peerError(pe *comm.PeerError) error {
	g := c.g
	return &comm.PeerError{FailedRank: pe.FailedRank, Cause: pe.Cause, Group: g.name,
		GlobalRank: g.global[g.rank], Op: c.op, Seq: c.seq}
}

// members returns the group ranks the call waits on.
func (c *call) members() []int {
	if c.peer >= 0 {
		return []int{c.peer}
	}
	ks := make([]int, 0, len(c.g.global)-1)
	for k := range c.g.global {
		if k != c.g.rank {
			ks = append(ks, k)
		}
	}
	return ks
}

// hopeless returns the failure of a member the call needs that has
// returned from its Run function without issuing the operation, so the
// wait cannot succeed. Exited members are asked (a status query) only when
// a new exit notice has arrived.
func (c *call) hopeless() *comm.PeerError {
	w := c.g.w
	n := w.nexited.Load()
	if n == c.nexited {
		return nil
	}
	c.nexited = n
	for _, k := range c.members() {
		gr := c.g.global[k]
		if c.cleared[k] {
			continue
		}
		if _, exited := w.rankState(gr); !exited {
			continue
		}
		rep := w.queryAll(map[int]query{gr: c.query(k)})[gr]
		if rep == nil {
			continue
		}
		if rep.Known && rep.N > c.seq {
			if c.cleared == nil {
				c.cleared = map[int]bool{}
			}
			c.cleared[k] = true
			continue
		}
		return &comm.PeerError{FailedRank: gr, Cause: fmt.Errorf("its Run function returned without issuing %s on group %s",
			c.describeAt(k), c.g.label())}
	}
	return nil
}

// describe names the call for messages: "AllReduce #3", "Send #0 to rank 1".
func (c *call) describe() string {
	switch {
	case c.peer < 0:
		return fmt.Sprintf("%s #%d", c.op, c.seq)
	case c.op == comm.OpSend:
		return fmt.Sprintf("%s #%d to rank %d", c.op, c.seq, c.peer)
	}
	return fmt.Sprintf("%s #%d from rank %d", c.op, c.seq, c.peer)
}

// describeAt names the same operation as member k issues it.
func (c *call) describeAt(k int) string {
	switch {
	case c.peer < 0:
		return c.describe()
	case c.op == comm.OpSend:
		return fmt.Sprintf("%s #%d from rank %d", comm.OpRecv, c.seq, c.g.rank)
	}
	return fmt.Sprintf("%s #%d to rank %d", comm.OpSend, c.seq, c.g.rank)
}

// doing describes the call as a hang report's "blocked in" does.
func (c *call) doing() string { return c.describe() + " on group " + c.g.label() }

// query is the status query that asks member k about this call.
func (c *call) query(k int) query {
	q := query{Group: c.g.key, Kind: "coll", Peer: c.g.rank, Skip: c.describeAt(k) + " on group " + c.g.label()}
	switch {
	case c.peer < 0:
	case c.op == comm.OpSend:
		q.Kind = "recv"
	default:
		q.Kind = "send"
	}
	return q
}

// timeoutError builds the hang report of a call that gave up, asking every
// member it waits on what it last issued and what it is blocked in.
func (c *call) timeoutError(cause error) *comm.TimeoutError {
	g, w := c.g, c.g.w
	e := &comm.TimeoutError{Group: g.name, GlobalRanks: g.global, Rank: g.rank, GlobalRank: g.global[g.rank],
		Op: c.op, Seq: c.seq, Peer: c.peer, Waited: time.Since(c.start), Cause: cause}
	ks := c.members()
	qs := make(map[int]query, len(ks))
	for _, k := range ks {
		qs[g.global[k]] = c.query(k)
	}
	reps := w.queryAll(qs)
	for _, k := range ks {
		gr := g.global[k]
		ms := comm.MemberState{Rank: k, GlobalRank: gr, Status: comm.StatusNotArrived}
		failed, _ := w.rankState(gr)
		rep := reps[gr]
		switch {
		case failed != nil:
			ms.Status, ms.Err = comm.StatusFailed, failed
		case rep == nil:
			ms.Status = comm.StatusUnknown
		case rep.Known && rep.N > c.seq:
			ms.Status = comm.StatusArrived
		case rep.Exited:
			ms.Status = comm.StatusExited
		}
		if rep != nil {
			if rep.Known && rep.N > 0 {
				ms.LastOp, ms.LastSeq = rep.Op, rep.N-1
			}
			ms.Doing = rep.Doing
		}
		e.Members = append(e.Members, ms)
	}
	return e
}
