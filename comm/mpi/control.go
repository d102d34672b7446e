//go:build mpi

package mpi

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/gotron/gotron/comm"
)

// The control plane. Each World has a communicator of its own (ctl, a
// duplicate of MPI_COMM_WORLD) and a goroutine, the controller, that keeps
// two receives posted on it from any rank:
//
//   - notices (tagNotice): a rank failed, with its error (errwire.go); a
//     rank noticed that another returned without issuing an operation it
//     waits on (a relay, so every rank names the same culprit); or a rank's
//     Run function returned. The controller records them and wakes every
//     waiter, so a failure anywhere ends every wait everywhere within one
//     poll;
//   - status queries (tagQuery): a rank whose call gave up waiting asks
//     each peer what it last issued on the group (or pair) and what it is
//     blocked in; the controller answers from the group's counters, so a
//     hang report says what every member was doing — the side channel that
//     MPI itself does not have.
//
// The controller polls its two receives with MPI_Test, every 100µs after
// activity and backing off to every 5ms when idle: a few hundred cheap
// calls a second, which also drive Open MPI's progress engine for
// operations nobody is waiting on. At each poll it also adopts the async
// messages' Works that nobody has started to wait for (World.adopt,
// work.go), so its pause bounds how long such a Work goes without a
// goroutine to drive it. While async messages are being issued (within
// ctlWorkHold of the last), the pause is at most ctlWorkPoll: a Work
// issued to overlap with computation gets its goroutine within about 1ms,
// at the cost of about 4% of a core for the controller while messages
// flow (measured on the development VM, idle: 1ms polls against 5ms).

const (
	tagNotice    = 1
	tagQuery     = 2
	tagReplyBase = 16 // replies use tagReplyBase + round number mod 2²⁰

	noticeCap = 256 << 10 // the largest notice, in bytes
	queryCap  = 16 << 10  // the largest query or reply

	ctlMinPoll  = 100 * time.Microsecond
	ctlMaxPoll  = 5 * time.Millisecond
	ctlWorkPoll = time.Millisecond
	ctlWorkHold = 100 * time.Millisecond

	// sendWait bounds the wait for a notice to leave; queryWait bounds a
	// round of status queries.
	sendWait  = 5 * time.Second
	queryWait = time.Second
)

// notice is a control message announcing a rank's failure or return. It
// also carries the first failure its sender knew of, so that a rank that
// returned because of another's failure is never taken for the cause: the
// receiver records that failure before the return.
type notice struct {
	Kind      string     `json:"k"`
	Err       *wireError `json:"e,omitempty"` // noticeFail: the sender's error
	Time      int64      `json:"t,omitempty"` // and when it failed (Unix ns)
	FirstRank int        `json:"fr,omitempty"`
	First     *wireError `json:"f,omitempty"`
	FirstTime int64      `json:"ft,omitempty"`
}

const (
	noticeFail  = "fail"  // the sender failed
	noticeExit  = "exit"  // the sender's Run function returned
	noticeRelay = "relay" // only First: a failure the sender noticed
)

// query asks a rank about one group: "coll" for its collectives, "send" for
// its messages to Peer (a group rank), "recv" for its receives from Peer.
type query struct {
	Tag   int    `json:"tag"`
	Group string `json:"g"`
	Kind  string `json:"k"`
	Peer  int    `json:"p"`
	Skip  string `json:"s"` // the waited-for operation, left out of Doing
}

// reply answers a query.
type reply struct {
	Known  bool   `json:"known"` // the rank has the group
	N      uint64 `json:"n"`     // operations issued (the next sequence number)
	Op     string `json:"op"`    // the last one issued
	Exited bool   `json:"exited"`
	Doing  string `json:"doing"`
}

// outMsg is a control message on its way out.
type outMsg struct {
	q   request
	mem cmem
}

// sendCtl starts sending payload to world rank dst with tag.
func (w *World) sendCtl(dst, tag int, payload []byte) (*outMsg, error) {
	m := &outMsg{}
	p := m.mem.alloc(len(payload))
	copy(unsafe.Slice((*byte)(p), len(payload)), payload)
	if err := isend(p, len(payload), tByte, dst, tag, w.ctl, &m.q); err != nil {
		m.mem.free()
		return nil, err
	}
	return m, nil
}

// done reports whether the message has left, freeing it then.
func (m *outMsg) done() bool {
	if ok, _ := m.q.test("MPI_Isend"); ok {
		m.mem.free()
		return true
	}
	return false
}

// broadcast sends n to every other rank and waits (at most sendWait) for
// the messages to leave.
func (w *World) broadcast(n notice) {
	w.mu.Lock()
	if pe := w.first; pe != nil && n.First == nil && pe.FailedRank != w.rank {
		n.FirstRank, n.First, n.FirstTime = pe.FailedRank, encodeError(pe.Cause), w.firstAt
	}
	w.mu.Unlock()
	if n.Err != nil && n.First != nil {
		n.Err.fit(noticeCap/2 - 64)
		n.First.fit(noticeCap/2 - 64)
	} else if n.Err != nil {
		n.Err.fit(noticeCap - 64)
	} else if n.First != nil {
		n.First.fit(noticeCap - 64)
	}
	payload, _ := json.Marshal(n)
	var out []*outMsg
	for r := range w.size {
		if r == w.rank {
			continue
		}
		if m, err := w.sendCtl(r, tagNotice, payload); err == nil {
			out = append(out, m)
		}
	}
	var s sleeper
	start := time.Now()
	for {
		out = slices.DeleteFunc(out, (*outMsg).done)
		if len(out) == 0 || time.Since(start) > sendWait {
			return // a message still pending is left to MPI (its memory leaks)
		}
		s.sleep(backoff(time.Since(start), 0), nil, nil, nil, nil)
	}
}

// control is the controller goroutine.
func (w *World) control() {
	defer close(w.stopped)
	defer w.stopAdopting()
	var mem cmem
	defer mem.free()
	nbuf, qbuf := mem.alloc(noticeCap), mem.alloc(queryCap)
	var nq, qq request
	post := func(buf unsafe.Pointer, tag int, q *request) bool {
		*q = request{}
		n := noticeCap
		if tag == tagQuery {
			n = queryCap
		}
		return irecv(buf, n, tByte, -1, tag, w.ctl, q) == nil
	}
	if !post(nbuf, tagNotice, &nq) || !post(qbuf, tagQuery, &qq) {
		return
	}
	var out []*outMsg
	var s sleeper
	var lastWork time.Time // when adopt last saw a new Work
	interval := ctlMinPoll
	for {
		active := false
		if ok, err := nq.test("MPI_Irecv"); ok {
			active = true
			if err == nil {
				w.onNotice(nq.src, cBytes(nbuf, nq.nbytes))
			}
			if !post(nbuf, tagNotice, &nq) {
				return
			}
		}
		if ok, err := qq.test("MPI_Irecv"); ok {
			active = true
			if err == nil {
				if m := w.onQuery(qq.src, cBytes(qbuf, qq.nbytes)); m != nil {
					out = append(out, m)
				}
			}
			if !post(qbuf, tagQuery, &qq) {
				return
			}
		}
		out = slices.DeleteFunc(out, (*outMsg).done)
		seen, young := w.adopt(false)
		if young {
			active = true
		}
		if active {
			interval = ctlMinPoll
		} else {
			interval = min(2*interval, ctlMaxPoll)
		}
		if seen {
			lastWork = time.Now()
		}
		if !lastWork.IsZero() && time.Since(lastWork) < ctlWorkHold {
			interval = min(interval, ctlWorkPoll)
		}
		if s.sleep(interval, w.stop, nil, nil, nil) {
			nq.cancel()
			qq.cancel()
			return
		}
	}
}

// cBytes copies n bytes of C memory.
func cBytes(p unsafe.Pointer, n int) []byte {
	return slices.Clone(unsafe.Slice((*byte)(p), n))
}

func (w *World) onNotice(src int, payload []byte) {
	var n notice
	if json.Unmarshal(payload, &n) != nil {
		return
	}
	if n.First != nil {
		w.fail(n.FirstRank, n.First.decode(n.FirstRank), n.FirstTime)
	}
	switch n.Kind {
	case noticeFail:
		if n.Err == nil {
			n.Err = &wireError{Msg: "failed"}
		}
		w.fail(src, n.Err.decode(src), n.Time)
	case noticeExit:
		w.markExited(src)
	}
}

func (w *World) onQuery(src int, payload []byte) *outMsg {
	var q query
	if json.Unmarshal(payload, &q) != nil {
		return nil
	}
	r := w.answer(q)
	b, _ := json.Marshal(r)
	m, err := w.sendCtl(src, q.Tag, b)
	if err != nil {
		return nil
	}
	return m
}

// answer answers a status query from this process's state.
func (w *World) answer(q query) reply {
	var r reply
	_, r.Exited = w.rankState(w.rank)
	if r.Doing = w.doing(q.Skip); len(r.Doing) > queryCap/2 {
		r.Doing = r.Doing[:queryCap/2] + " …(cut)"
	}
	g := w.lookup(q.Group)
	if g == nil {
		return r
	}
	r.Known = true
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case q.Kind == "coll":
		r.N, r.Op = g.seq, g.lastOp
	case q.Peer < 0 || q.Peer >= len(g.global):
	case q.Kind == "send":
		r.N, r.Op = g.sent[q.Peer], comm.OpSend
	case q.Kind == "recv":
		r.N, r.Op = g.recvd[q.Peer], comm.OpRecv
	}
	return r
}

// doing describes what this process is blocked in, leaving out skip.
func (w *World) doing(skip string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []uint64
	for id := range w.blocked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var parts []string
	for _, id := range ids {
		if what := w.blocked[id].doing(); what != skip {
			parts = append(parts, what)
		}
	}
	return strings.Join(parts, "; ")
}

// queryAll asks each world rank in qs its state and returns the replies
// that came within queryWait (nil where none came).
func (w *World) queryAll(qs map[int]query) map[int]*reply {
	w.queryMu.Lock()
	defer w.queryMu.Unlock()
	w.queryN++
	tag := tagReplyBase + int(w.queryN%(1<<20))
	type pending struct {
		q   request
		buf unsafe.Pointer
		out *outMsg
	}
	var mem cmem
	ps := map[int]*pending{}
	for dst, q := range qs {
		q.Tag = tag
		b, _ := json.Marshal(q)
		p := &pending{buf: mem.alloc(queryCap)}
		if irecv(p.buf, queryCap, tByte, dst, tag, w.ctl, &p.q) != nil {
			continue
		}
		out, err := w.sendCtl(dst, tagQuery, b)
		if err != nil {
			p.q.cancel()
			continue
		}
		p.out = out
		ps[dst] = p
	}
	replies := map[int]*reply{}
	var s sleeper
	start := time.Now()
	for {
		left := 0
		for dst, p := range ps {
			if p.out != nil && p.out.done() {
				p.out = nil
			}
			if _, ok := replies[dst]; ok {
				continue
			}
			if ok, err := p.q.test("MPI_Irecv"); ok {
				var r reply
				if err == nil && json.Unmarshal(cBytes(p.buf, p.q.nbytes), &r) == nil {
					replies[dst] = &r
				} else {
					replies[dst] = nil
				}
				continue
			}
			left++
		}
		if left == 0 || time.Since(start) > queryWait {
			break
		}
		s.sleep(backoff(time.Since(start), 0), nil, nil, nil, nil)
	}
	clean := true
	for dst, p := range ps {
		if _, ok := replies[dst]; !ok {
			p.q.cancel()
		}
		if p.out != nil && !p.out.done() {
			clean = false // the query never left: keep its memory
		}
	}
	if clean {
		mem.free()
	}
	return replies
}
