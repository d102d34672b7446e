package local

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
)

// Point-to-point messages meet in the table of their ordered pair: the
// sender is party 0, the receiver party 1, and the receiver copies straight
// from the sender's buffer.

// p2p issues and publishes one message operation.
func (g *group) p2p(ctx context.Context, k opKind, buf comm.Buffer, peer int) (call, error) {
	var c call
	if k == opSend {
		c = g.c.pair(g.rank, peer).issue(ctx, 0, k)
	} else {
		c = g.c.pair(peer, g.rank).issue(ctx, 1, k)
	}
	a := args{kind: k, a: buf}
	return c, c.arrive(&a)
}

func (g *group) Send(ctx context.Context, buf comm.Buffer, dst int) error {
	if err := comm.CheckP2P(g, comm.OpSend, buf, dst); err != nil {
		return err
	}
	c, err := g.p2p(ctx, opSend, buf, dst)
	if err != nil {
		return err
	}
	return c.finish()
}

func (g *group) Recv(ctx context.Context, buf comm.Buffer, src int) error {
	if err := comm.CheckP2P(g, comm.OpRecv, buf, src); err != nil {
		return err
	}
	c, err := g.p2p(ctx, opRecv, buf, src)
	if err != nil {
		return err
	}
	return c.finish()
}

func (g *group) SendAsync(ctx context.Context, buf comm.Buffer, dst int) (comm.Work, error) {
	if err := comm.CheckP2P(g, comm.OpSend, buf, dst); err != nil {
		return nil, err
	}
	c, err := g.p2p(ctx, opSend, buf, dst)
	if err != nil {
		return nil, err
	}
	return startWork(g.c.w, []call{c}), nil
}

func (g *group) RecvAsync(ctx context.Context, buf comm.Buffer, src int) (comm.Work, error) {
	if err := comm.CheckP2P(g, comm.OpRecv, buf, src); err != nil {
		return nil, err
	}
	c, err := g.p2p(ctx, opRecv, buf, src)
	if err != nil {
		return nil, err
	}
	return startWork(g.c.w, []call{c}), nil
}

// BatchP2P publishes every op before waiting on any, so a batch that sends
// and receives with the same peers cannot deadlock.
func (g *group) BatchP2P(ctx context.Context, ops []comm.P2POp) (comm.Work, error) {
	if err := comm.CheckBatchP2P(g, ops); err != nil {
		return nil, err
	}
	calls := make([]call, 0, len(ops))
	for i, op := range ops {
		k := opSend
		if op.Kind == comm.Irecv {
			k = opRecv
		}
		c, err := g.p2p(ctx, k, op.Buf, op.Peer)
		if err != nil {
			for j := range calls {
				calls[j].abandon()
			}
			return nil, fmt.Errorf("BatchP2P ops[%d]: %w", i, err)
		}
		calls = append(calls, c)
	}
	return startWork(g.c.w, calls), nil
}

// abandon leaves a published call that will not be finished: it withdraws
// if its peers have not all arrived, else departs without computing.
func (c *call) abandon() {
	m := c.m
	m.mu.Lock()
	if !m.ready {
		c.withdraw()
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	c.depart()
	c.awaitDone()
}
