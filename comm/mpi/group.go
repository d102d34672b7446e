//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"sync"

	"github.com/gotron/gotron/comm"
)

// group is one process's handle on a group: it implements comm.Group over
// five MPI communicators with the same members, so that traffic of
// different kinds never has to be matched by MPI in an order that the
// goroutines of one process cannot guarantee:
//
//	hdr  each collective's header exchange (MPI_Iallgather), posted in call
//	     order by the caller; also MPI_Comm_split for NewSubgroups
//	d1   the first data phase of a collective
//	d2   the second data phase (AllReduce's all-gather)
//	p2p  point-to-point data, tagged with the pair's sequence number and
//	     the dtype
//	note each receive's note to its sender (its dtype and length), sent
//	     when the receive is issued (p2p.go)
//
// The data phases of async collectives are issued by their own goroutines
// once the headers have arrived; a ticket chain per communicator (tail1,
// tail2) makes them issue in sequence-number order, as MPI requires of
// collectives on one communicator.
type group struct {
	w      *World
	name   string
	key    string // unique in the World, the same on every member
	rank   int
	global []int

	hdr, d1, d2, p2p, note mpiComm

	mu           sync.Mutex
	seq          uint64 // collectives issued
	lastOp       string
	tail1, tail2 chan struct{} // closed once the last data phase so far is issued
	sent, recvd  []uint64      // messages issued, per peer
	broken       error         // set once the group is unusable
}

var _ comm.Group = (*group)(nil)

// newGroup builds a group on hdr, duplicating it for the other
// communicators (a collective over its members).
func newGroup(w *World, name, key string, hdr mpiComm, global []int) (*group, error) {
	rank, size, err := rankSize(hdr)
	if err != nil {
		return nil, err
	}
	if size != len(global) {
		return nil, fmt.Errorf("mpi: group %q: the communicator has %d ranks but the group lists %d (a bug in package mpi)", name, size, len(global))
	}
	g := &group{w: w, name: name, key: key, rank: rank, global: global, hdr: hdr,
		sent: make([]uint64, size), recvd: make([]uint64, size)}
	comms := []mpiComm{hdr}
	for _, c := range []*mpiComm{&g.d1, &g.d2, &g.p2p, &g.note} {
		if *c, err = dupComm(hdr); err != nil {
			return nil, err
		}
		comms = append(comms, *c)
	}
	closed := make(chan struct{})
	close(closed)
	g.tail1, g.tail2 = closed, closed
	w.register(g, comms...)
	return g, nil
}

func (g *group) Rank() int          { return g.rank }
func (g *group) Size() int          { return len(g.global) }
func (g *group) GlobalRanks() []int { return g.global }
func (g *group) Name() string       { return g.name }

func (g *group) label() string { return comm.GroupLabel(g.name, g.global) }

// breakWith marks the group unusable.
func (g *group) breakWith(err error) {
	g.mu.Lock()
	if g.broken == nil {
		g.broken = err
	}
	g.mu.Unlock()
}

func (g *group) brokenErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.broken
}

// argErr reports an argument this backend cannot carry.
func (g *group) argErr(op, format string, args ...any) error {
	return &comm.ArgError{Group: g.name, GlobalRanks: g.global, Rank: g.rank, Op: op, Msg: fmt.Sprintf(format, args...)}
}

// NewSubgroups splits the group with MPI_Comm_split, once every member has
// issued the call with the same name and partition (checked through the
// header exchange, so a missing member is a timeout, not a hang).
func (g *group) NewSubgroups(ctx context.Context, name string, partition [][]int) (comm.Group, error) {
	mine, err := comm.CheckPartition(g, name, partition)
	if err != nil {
		return nil, err
	}
	h := header{hKind: int64(kNewSubgroups), hHash1: int64(hashString(name)), hHash2: int64(hashPartition(partition))}
	c, err := g.issue(ctx, h, detail{Name: name, Parts: partition}, false, false)
	if err != nil {
		return nil, err
	}
	if err := c.runBlocking(); err != nil {
		return nil, err
	}
	color, key := -1, 0
	if mine >= 0 {
		color = mine
		for i, r := range partition[mine] {
			if r == g.rank {
				key = i
			}
		}
	}
	sub, ok, err := splitComm(g.hdr, color, key)
	if err != nil {
		g.breakWith(err)
		return nil, fmt.Errorf("comm: %s #%d on group %s: %w", comm.OpNewSubgroups, c.seq, g.label(), err)
	}
	if !ok {
		return nil, nil
	}
	global := make([]int, len(partition[mine]))
	for i, r := range partition[mine] {
		global[i] = g.global[r]
	}
	sg, err := newGroup(g.w, name, fmt.Sprintf("%s/%d.%d", g.key, c.seq, mine), sub, global)
	if err != nil {
		return nil, fmt.Errorf("comm: %s #%d on group %s: %w", comm.OpNewSubgroups, c.seq, g.label(), err)
	}
	return sg, nil
}
