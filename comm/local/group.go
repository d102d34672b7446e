package local

import (
	"context"

	"github.com/gotron/gotron/comm"
)

// group is one rank's handle on a group: it implements comm.Group.
type group struct {
	c    *core
	rank int
}

var _ comm.Group = (*group)(nil)

func (g *group) Rank() int          { return g.rank }
func (g *group) Size() int          { return len(g.c.global) }
func (g *group) GlobalRanks() []int { return g.c.global }
func (g *group) Name() string       { return g.c.name }

// collective runs a blocking collective of kind k.
func (g *group) collective(ctx context.Context, k opKind, a args) error {
	c := g.c.coll.issue(ctx, g.rank, k)
	a.kind = k
	if err := c.arrive(&a); err != nil {
		return err
	}
	return c.finish()
}

// finish runs the steps after arrive: wait for every party, check they
// agree, compute this party's share, and leave once every party is done.
func (c *call) finish() (err error) {
	if err := c.awaitReady(); err != nil {
		return err
	}
	defer func() {
		c.depart()
		c.awaitDone()
	}()
	if err := c.agree(); err != nil {
		return err
	}
	c.compute()
	if c.kind == opNewSubgroups {
		c.makeSubgroups()
	}
	return nil
}

func (g *group) AllReduce(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) error {
	if err := comm.CheckAllReduce(g, buf, op); err != nil {
		return err
	}
	return g.collective(ctx, opAllReduce, args{a: buf, rop: op})
}

func (g *group) ReduceScatter(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) error {
	if err := comm.CheckReduceScatter(g, out, in, op); err != nil {
		return err
	}
	return g.collective(ctx, opReduceScatter, args{a: out, b: in, rop: op})
}

func (g *group) ReduceScatterV(ctx context.Context, out, in comm.Buffer, counts []int, op comm.ReduceOp) error {
	if err := comm.CheckReduceScatterV(g, out, in, counts, op); err != nil {
		return err
	}
	return g.collective(ctx, opReduceScatterV, args{a: out, b: in, c1: counts, rop: op})
}

func (g *group) AllGather(ctx context.Context, out, in comm.Buffer) error {
	if err := comm.CheckAllGather(g, out, in); err != nil {
		return err
	}
	return g.collective(ctx, opAllGather, args{a: out, b: in})
}

func (g *group) AllGatherV(ctx context.Context, out, in comm.Buffer, counts []int) error {
	if err := comm.CheckAllGatherV(g, out, in, counts); err != nil {
		return err
	}
	return g.collective(ctx, opAllGatherV, args{a: out, b: in, c1: counts})
}

func (g *group) Broadcast(ctx context.Context, buf comm.Buffer, root int) error {
	if err := comm.CheckBroadcast(g, buf, root); err != nil {
		return err
	}
	return g.collective(ctx, opBroadcast, args{a: buf, root: root})
}

func (g *group) AllToAll(ctx context.Context, out, in comm.Buffer) error {
	if err := comm.CheckAllToAll(g, out, in); err != nil {
		return err
	}
	return g.collective(ctx, opAllToAll, args{a: out, b: in})
}

func (g *group) AllToAllV(ctx context.Context, out, in comm.Buffer, sendCounts, recvCounts []int) error {
	if err := comm.CheckAllToAllV(g, out, in, sendCounts, recvCounts); err != nil {
		return err
	}
	return g.collective(ctx, opAllToAllV, args{a: out, b: in, c1: sendCounts, c2: recvCounts})
}

func (g *group) Barrier(ctx context.Context) error {
	return g.collective(ctx, opBarrier, args{})
}

func (g *group) AllReduceAsync(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	if err := comm.CheckAllReduce(g, buf, op); err != nil {
		return nil, err
	}
	return g.async(ctx, opAllReduce, args{a: buf, rop: op})
}

func (g *group) ReduceScatterAsync(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	if err := comm.CheckReduceScatter(g, out, in, op); err != nil {
		return nil, err
	}
	return g.async(ctx, opReduceScatter, args{a: out, b: in, rop: op})
}

func (g *group) AllGatherAsync(ctx context.Context, out, in comm.Buffer) (comm.Work, error) {
	if err := comm.CheckAllGather(g, out, in); err != nil {
		return nil, err
	}
	return g.async(ctx, opAllGather, args{a: out, b: in})
}

func (g *group) BroadcastAsync(ctx context.Context, buf comm.Buffer, root int) (comm.Work, error) {
	if err := comm.CheckBroadcast(g, buf, root); err != nil {
		return nil, err
	}
	return g.async(ctx, opBroadcast, args{a: buf, root: root})
}

// async issues and publishes a collective now and finishes it on its own
// goroutine.
func (g *group) async(ctx context.Context, k opKind, a args) (comm.Work, error) {
	c := g.c.coll.issue(ctx, g.rank, k)
	a.kind = k
	if err := c.arrive(&a); err != nil {
		return nil, err
	}
	return startWork(g.c.w, []call{c}), nil
}

func (g *group) NewSubgroups(ctx context.Context, name string, partition [][]int) (comm.Group, error) {
	mine, err := comm.CheckPartition(g, name, partition)
	if err != nil {
		return nil, err
	}
	c := g.c.coll.issue(ctx, g.rank, opNewSubgroups)
	a := args{kind: opNewSubgroups, name: name, parts: partition}
	if err := c.arrive(&a); err != nil {
		return nil, err
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	if mine < 0 {
		return nil, nil
	}
	for k, r := range partition[mine] {
		if r == g.rank {
			return &group{c: c.subs[mine], rank: k}, nil
		}
	}
	panic("local: NewSubgroups lost the caller's subgroup") // CheckPartition found it
}

// makeSubgroups makes the subgroups of a ready NewSubgroups, once for all
// parties, and keeps them in the call.
func (c *call) makeSubgroups() {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.result == nil {
		a := &m.args[0]
		for _, sub := range a.parts {
			global := make([]int, len(sub))
			for k, r := range sub {
				global[k] = c.t.c.global[r]
			}
			m.result = append(m.result, newCore(c.w, a.name, global))
		}
	}
	c.subs = m.result
}
