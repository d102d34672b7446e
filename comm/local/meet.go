package local

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/comm"
)

// A table is where the parties of one kind of operation meet: the members
// of a group for its collectives, or a sender (party 0) and a receiver
// (party 1) for the messages of one ordered pair. Each operation has a
// sequence number, counted per party in issue order; the parties' k-th
// operations meet in the table's meet for k.
//
// Every operation goes through the same five steps, each party on its own:
//
//	arrive      publish the arguments (never blocks)
//	awaitReady  wait until every party has arrived
//	compute     do this party's share, reading and writing the other
//	            parties' buffers directly (zero copy)
//	depart      say so (never blocks)
//	awaitDone   wait until every party has departed, so no one still
//	            touches this party's buffers (AllReduce: until every
//	            block is reduced, see call.allReduce)
//
// Only awaitReady can wait on a peer that is late; it is bounded by the
// context, Options.Timeout and the world's failures. awaitDone waits only on
// parties that are computing, which never block.
type table struct {
	c       *core
	members []int // group rank of each party
	p2p     bool
	issued  []issued // per party

	mu   sync.Mutex
	live map[uint64]*meet
	free []*meet
}

func newTable(c *core, members []int, p2p bool) *table {
	return &table{c: c, members: members, p2p: p2p, issued: make([]issued, len(members)), live: map[uint64]*meet{}}
}

func (t *table) parties() int { return len(t.members) }

// worldRank returns the world rank of party k.
func (t *table) worldRank(k int) int { return t.c.global[t.members[k]] }

// meet is one operation's meeting point. Meets are recycled once every party
// has left, so the hot path allocates nothing.
type meet struct {
	mu       sync.Mutex
	seq      uint64
	arrived  int
	departed int
	left     int
	ready    bool // every party has arrived
	done     bool // every party has departed
	// readyFlag and doneFlag mirror ready and done for spinning waiters,
	// which read them without the lock.
	readyFlag, doneFlag atomic.Bool
	args                []args
	wake                []chan struct{} // per party, capacity 1
	timers              []*time.Timer   // per party, made on first use
	scratch             [][]comm.Buffer // per party, for Reduce
	share               arShare         // AllReduce: the blocks the parties share
	result              []*core         // NewSubgroups: the subgroups made
}

// get returns the meet for seq, making it if no party has arrived yet.
func (t *table) get(seq uint64) *meet {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.live[seq]; m != nil {
		return m
	}
	var m *meet
	if n := len(t.free); n > 0 {
		m = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		p := t.parties()
		m = &meet{args: make([]args, p), wake: make([]chan struct{}, p), timers: make([]*time.Timer, p), scratch: make([][]comm.Buffer, p),
			share: newARShare(p)}
		for k := range m.wake {
			m.wake[k] = make(chan struct{}, 1)
		}
	}
	m.seq = seq
	t.live[seq] = m
	return m
}

// recycle returns a meet that every party has left to the free list.
func (t *table) recycle(m *meet) {
	m.arrived, m.departed, m.left = 0, 0, 0
	m.ready, m.done = false, false
	m.readyFlag.Store(false)
	m.doneFlag.Store(false)
	clear(m.args)
	m.result = nil
	for k := range m.scratch {
		clear(m.scratch[k])
	}
	m.share.reset()
	t.mu.Lock()
	delete(t.live, m.seq)
	t.free = append(t.free, m)
	t.mu.Unlock()
}

// wakeOthers wakes every party but p. The caller holds m.mu.
func (m *meet) wakeOthers(p int) {
	for k, ch := range m.wake {
		if k == p {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// call is one party's progress through one operation.
type call struct {
	w     *World
	t     *table
	m     *meet
	party int
	kind  opKind
	seq   uint64
	ctx   context.Context
	start time.Time

	blocked bool    // the activity is recorded
	timerOn bool    // the party's timer is armed
	gone    bool    // departed (BatchP2P bookkeeping)
	subs    []*core // NewSubgroups: the subgroups made
}

// issue gives a new operation of kind k its sequence number.
func (t *table) issue(ctx context.Context, party int, k opKind) call {
	return call{w: t.c.w, t: t, party: party, kind: k, seq: t.issued[party].next(k), ctx: ctx, start: time.Now()}
}

// arrive publishes a.
func (c *call) arrive(a *args) error {
	if pe := c.w.failure(); pe != nil {
		return c.peerError(pe)
	}
	c.m = c.t.get(c.seq)
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if pe := c.w.failure(); pe != nil {
		return c.peerError(pe)
	}
	m.args[c.party] = *a
	m.args[c.party].present = true
	m.arrived++
	if m.arrived == c.t.parties() {
		m.ready = true
		m.readyFlag.Store(true)
		m.wakeOthers(c.party)
	}
	return nil
}

// awaitReady waits until every party has arrived. On an error the call has
// withdrawn from the meet and must not compute or depart.
func (c *call) awaitReady() error {
	m := c.m
	defer c.unblock()
	var timeout <-chan time.Time
	for {
		ev := *c.w.events.Load()
		m.mu.Lock()
		if m.ready {
			m.mu.Unlock()
			return nil
		}
		if err := c.hopeless(); err != nil {
			c.withdraw()
			m.mu.Unlock()
			return c.abort(err)
		}
		m.mu.Unlock()
		if !c.blocked {
			if c.w.spin && spin(&m.readyFlag) {
				continue
			}
			c.block()
			timeout = c.startTimer()
		}
		select {
		case <-m.wake[c.party]:
		case <-ev:
		case <-c.ctx.Done():
			return c.giveUp(c.ctx.Err())
		case <-timeout:
			c.timerOn = false
			return c.giveUp(comm.ErrTimeout)
		}
	}
}

// giveUp ends a wait cut short by cause, unless every party arrived
// meanwhile. A timed-out party fails the world: its peers could otherwise
// wait for it forever.
func (c *call) giveUp(cause error) error {
	m := c.m
	m.mu.Lock()
	if m.ready {
		m.mu.Unlock()
		return nil
	}
	if err := c.hopeless(); err != nil {
		c.withdraw()
		m.mu.Unlock()
		return c.abort(err)
	}
	err := c.timeoutError(cause)
	c.withdraw()
	m.mu.Unlock()
	c.w.fail(c.t.worldRank(c.party), err)
	return err
}

// abort returns the error of a call that withdrew because a peer is gone,
// after failing the world (a no-op when it has failed already): the
// members still waiting on this rank, in this or other operations, must not
// wait for a timeout.
func (c *call) abort(err error) error {
	c.w.fail(c.t.worldRank(c.party), err)
	return err
}

// withdraw takes the call's arguments back. The caller holds m.mu and the
// meet is not ready, so no party is reading them.
func (c *call) withdraw() {
	c.m.args[c.party] = args{}
	c.m.arrived--
}

// hopeless returns the error of a wait that cannot succeed: the world has
// failed, or a party's rank has returned without issuing this operation.
// The caller holds m.mu.
func (c *call) hopeless() error {
	if pe := c.w.failure(); pe != nil {
		return c.peerError(pe)
	}
	for k := range c.t.parties() {
		if k == c.party || c.m.args[k].present {
			continue
		}
		if n, _ := c.t.issued[k].last(); n > c.seq {
			continue
		}
		wr := c.t.worldRank(k)
		if _, exited := c.w.rankStatus(wr); exited {
			// A rank that returned an error failed the world as it
			// exited (both are recorded at once): report that failure.
			if pe := c.w.failure(); pe != nil {
				return c.peerError(pe)
			}
			return c.peerError(&comm.PeerError{FailedRank: wr,
				Cause: fmt.Errorf("its Run function returned without issuing %s", c.describe())})
		}
	}
	return nil
}

// depart says the call is done with every buffer.
func (c *call) depart() {
	m := c.m
	m.mu.Lock()
	m.departed++
	if m.departed == c.t.parties() {
		m.done = true
		m.doneFlag.Store(true)
		m.wakeOthers(c.party)
	}
	m.mu.Unlock()
}

// finishEarly marks the meet done before every party has departed: the
// work that touches the parties' buffers is complete (see call.allReduce).
// Party p wakes the others.
func (m *meet) finishEarly(p int) {
	m.mu.Lock()
	m.done = true
	m.doneFlag.Store(true)
	m.wakeOthers(p)
	m.mu.Unlock()
}

// awaitDone waits until the meet is done (every party has departed, or
// finishEarly was called); the last to leave recycles the meet.
func (c *call) awaitDone() {
	m := c.m
	if c.w.spin {
		spin(&m.doneFlag)
	}
	for {
		m.mu.Lock()
		if m.done {
			m.left++
			last := m.left == c.t.parties()
			m.mu.Unlock()
			if last {
				c.t.recycle(m)
			}
			c.m = nil
			return
		}
		m.mu.Unlock()
		<-m.wake[c.party]
	}
}

// spinRounds bounds how long a waiter polls before it parks: 64 yields of
// the processor, some microseconds. Peers of a collective usually arrive
// within that, whereas a parked goroutine woken by a channel send is queued
// on its waker's processor and reaches an idle one only after a delay, which
// serialises the ranks' computations. Worlds with more ranks than
// GOMAXPROCS never spin (see World.spin).
const spinRounds = 64

// spin polls flag for a bounded time, yielding the processor between polls,
// and reports whether it became true.
func spin(flag *atomic.Bool) bool {
	for range spinRounds {
		for range 32 {
			if flag.Load() {
				return true
			}
		}
		runtime.Gosched()
	}
	return flag.Load()
}

// startTimer arms this party's timer for what is left of the timeout and
// returns its channel (nil when there is no timeout).
func (c *call) startTimer() <-chan time.Time {
	if c.w.timeout <= 0 {
		return nil
	}
	d := max(c.w.timeout-time.Since(c.start), time.Nanosecond)
	tm := c.m.timers[c.party]
	if tm == nil {
		tm = time.NewTimer(d)
		c.m.timers[c.party] = tm
	} else {
		tm.Reset(d)
	}
	c.timerOn = true
	return tm.C
}

// block records what the rank is blocked in, for hang reports.
func (c *call) block() {
	c.blocked = true
	rs := &c.w.ranks[c.t.worldRank(c.party)]
	rs.actMu.Lock()
	rs.act = activity{active: true, tab: c.t, kind: c.kind, seq: c.seq, party: c.party}
	rs.actMu.Unlock()
}

// unblock clears the record made by block and stops the timer.
func (c *call) unblock() {
	if c.timerOn {
		c.m.timers[c.party].Stop()
		c.timerOn = false
	}
	if !c.blocked {
		return
	}
	c.blocked = false
	rs := &c.w.ranks[c.t.worldRank(c.party)]
	rs.actMu.Lock()
	if a := rs.act; a.tab == c.t && a.seq == c.seq && a.party == c.party {
		rs.act = activity{}
	}
	rs.actMu.Unlock()
}

// describe names the call for messages: "AllReduce #3" or "Send #0 to rank 1".
func (c *call) describe() string {
	return describe(c.t, c.kind, c.seq, c.party)
}

func describe(t *table, k opKind, seq uint64, party int) string {
	if !t.p2p {
		return fmt.Sprintf("%v #%d", k, seq)
	}
	if party == 0 {
		return fmt.Sprintf("%v #%d to rank %d", k, seq, t.members[1])
	}
	return fmt.Sprintf("%v #%d from rank %d", k, seq, t.members[0])
}

// peerError reports the world's failure pe as seen by this call.
func (c *call) peerError(pe *comm.PeerError) error {
	return &comm.PeerError{FailedRank: pe.FailedRank, Cause: pe.Cause, Group: c.t.c.name,
		GlobalRank: c.t.worldRank(c.party), Op: c.kind.String(), Seq: c.seq}
}
