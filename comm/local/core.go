package local

import (
	"sync"
	"sync/atomic"

	"github.com/gotron/gotron/comm"
)

// opKind numbers the operations; it is packed into the issued counters.
type opKind uint8

const (
	opNone opKind = iota
	opAllReduce
	opReduceScatter
	opReduceScatterV
	opAllGather
	opAllGatherV
	opBroadcast
	opAllToAll
	opAllToAllV
	opBarrier
	opNewSubgroups
	opSend
	opRecv
)

var opNames = [...]string{
	opNone:           "",
	opAllReduce:      comm.OpAllReduce,
	opReduceScatter:  comm.OpReduceScatter,
	opReduceScatterV: comm.OpReduceScatterV,
	opAllGather:      comm.OpAllGather,
	opAllGatherV:     comm.OpAllGatherV,
	opBroadcast:      comm.OpBroadcast,
	opAllToAll:       comm.OpAllToAll,
	opAllToAllV:      comm.OpAllToAllV,
	opBarrier:        comm.OpBarrier,
	opNewSubgroups:   comm.OpNewSubgroups,
	opSend:           comm.OpSend,
	opRecv:           comm.OpRecv,
}

func (k opKind) String() string { return opNames[k] }

// issued packs the last operation a party issued on a table:
// (count of issued operations)<<8 | kind of the last one. Only the party's
// own rank writes it.
type issued struct{ v atomic.Uint64 }

// next returns the sequence number of a new operation of kind k and records
// it as issued.
func (s *issued) next(k opKind) uint64 {
	n := s.v.Load() >> 8
	s.v.Store((n+1)<<8 | uint64(k))
	return n
}

// last returns the number of issued operations and the kind of the last.
func (s *issued) last() (count uint64, k opKind) {
	v := s.v.Load()
	return v >> 8, opKind(v & 0xff)
}

// core is the state a group's members share: the rendezvous table of its
// collectives and, created on first use, one table per ordered pair of
// members for point-to-point messages.
type core struct {
	w      *World
	name   string
	global []int // world rank of each group rank
	coll   *table

	pairMu sync.Mutex
	pairs  []atomic.Pointer[table] // index src·n + dst
}

func newCore(w *World, name string, global []int) *core {
	n := len(global)
	c := &core{w: w, name: name, global: global, pairs: make([]atomic.Pointer[table], n*n)}
	c.coll = newTable(c, identity(n), false)
	return c
}

// pair returns the table of messages from group rank src to dst; party 0 is
// the sender, party 1 the receiver.
func (c *core) pair(src, dst int) *table {
	p := &c.pairs[src*len(c.global)+dst]
	if t := p.Load(); t != nil {
		return t
	}
	c.pairMu.Lock()
	defer c.pairMu.Unlock()
	if t := p.Load(); t != nil {
		return t
	}
	t := newTable(c, []int{src, dst}, true)
	p.Store(t)
	return t
}

func (c *core) label() string { return comm.GroupLabel(c.name, c.global) }
