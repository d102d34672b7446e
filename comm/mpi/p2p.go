//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"time"

	"github.com/gotron/gotron/comm"
)

// Point-to-point messages. The k-th Send from a to b travels on p2p with
// tag (k mod 2²⁹)·4 + dtype−1; the receiver posts MPI_Irecv from a with
// MPI_ANY_TAG, so MPI's non-overtaking rule matches the k-th receive with
// the k-th message, and the tag tells the receiver the sender's sequence
// number and dtype, the byte count its length. The receiver then replies on
// ack with its own dtype and length (tag k), so both sides see a mismatch
// and both return the same *comm.MismatchError; a Send therefore completes
// once its receiver has the data (a rendezvous, as comm.Group allows).

// message issues a Send or Recv (op) of buf with group rank peer.
func (g *group) message(ctx context.Context, op string, buf comm.Buffer, peer int) (*call, error) {
	if err := comm.CheckP2P(g, op, buf, peer); err != nil {
		return nil, err
	}
	if !fitsInt(buf.Bytes()) {
		return nil, g.argErr(op, "buf holds %d bytes, more than MPI's count limit of 2³¹−1; split the message", buf.Bytes())
	}
	g.mu.Lock()
	var seq uint64
	if op == comm.OpSend {
		seq = g.sent[peer]
		g.sent[peer]++
	} else {
		seq = g.recvd[peer]
		g.recvd[peer]++
	}
	broken := g.broken
	g.mu.Unlock()
	c := &call{g: g, op: op, seq: seq, peer: peer, ctx: ctx, start: time.Now()}
	c.setDeadline()
	if err := c.usable(broken); err != nil {
		c.finish()
		return nil, err
	}
	ptr := pin(&c.pin, buf)
	ackTag := int(seq % uint64(g.w.tagUB+1))
	seqTag := int(seq % uint64((g.w.tagUB+1)/4))
	if op == comm.OpSend {
		data, ack := c.req(), c.req()
		tag := seqTag*4 + int(buf.DType()-1)
		if err := isend(ptr, buf.Bytes(), tByte, peer, tag, g.p2p, data); err != nil {
			err = c.mpiFailed(err)
			c.finish()
			return nil, err
		}
		theirs := c.mem.int64s(2)
		if err := irecv(addr(comm.I64(theirs)), 16, tByte, peer, ackTag, g.ack, ack); err != nil {
			err = c.mpiFailed(err)
			c.finish()
			return nil, err
		}
		c.body = func(c *call) error {
			if err := c.await(data, "MPI_Isend"); err != nil {
				return err
			}
			if err := c.await(ack, "MPI_Irecv"); err != nil {
				return err
			}
			if dt := comm.DType(theirs[0]); dt != buf.DType() || theirs[1] != int64(buf.Len()) {
				return c.p2pMismatch(buf.String(), fmt.Sprintf("%v[%d]", dt, theirs[1]))
			}
			return nil
		}
		return c, nil
	}
	data := c.req()
	if err := irecv(ptr, buf.Bytes(), tByte, peer, -1, g.p2p, data); err != nil {
		err = c.mpiFailed(err)
		c.finish()
		return nil, err
	}
	c.body = func(c *call) error {
		long := false
		err := c.wait(nil, func() (bool, error) {
			ok, err := data.test("MPI_Irecv")
			if ok && truncated(err) {
				long = true
				return true, nil
			}
			return ok, err
		})
		if err != nil {
			return err
		}
		if data.tag < 0 || data.tag/4 != seqTag {
			return c.mpiFailed(fmt.Errorf("received the message tagged %d where message #%d was due (a bug in package mpi)", data.tag, seq))
		}
		dt := comm.DType(data.tag%4 + 1)
		var sent string
		switch {
		case long:
			sent = fmt.Sprintf("%v[more than %d]", dt, buf.Bytes()/dt.Size())
		case data.nbytes%dt.Size() != 0:
			sent = fmt.Sprintf("%v[%d bytes]", dt, data.nbytes)
		default:
			sent = fmt.Sprintf("%v[%d]", dt, data.nbytes/dt.Size())
		}
		mine := c.mem.int64s(2)
		mine[0], mine[1] = int64(buf.DType()), int64(buf.Len())
		ack := c.req()
		if err := isend(addr(comm.I64(mine)), 16, tByte, peer, ackTag, g.ack, ack); err != nil {
			return c.mpiFailed(err)
		}
		if err := c.await(ack, "MPI_Isend"); err != nil {
			return err
		}
		if long || dt != buf.DType() || data.nbytes != buf.Bytes() {
			return c.p2pMismatch(sent, buf.String())
		}
		return nil
	}
	return c, nil
}

// p2pMismatch reports a message whose sender and receiver disagree, the
// same way on both sides: the sender is Rank, the receiver Peer.
func (c *call) p2pMismatch(sender, receiver string) error {
	src, dst := c.g.rank, c.peer
	if c.op == comm.OpRecv {
		src, dst = c.peer, c.g.rank
	}
	return &comm.MismatchError{Group: c.g.name, GlobalRanks: c.g.global, Op: c.op, Seq: c.seq,
		What: "dtype and length", Rank: src, Mine: sender, Peer: dst, PeerOp: comm.OpRecv, Theirs: receiver}
}

func (g *group) Send(ctx context.Context, buf comm.Buffer, dst int) error {
	return runNow(g.message(ctx, comm.OpSend, buf, dst))
}

func (g *group) Recv(ctx context.Context, buf comm.Buffer, src int) error {
	return runNow(g.message(ctx, comm.OpRecv, buf, src))
}

func (g *group) SendAsync(ctx context.Context, buf comm.Buffer, dst int) (comm.Work, error) {
	return g.runLater(g.message(ctx, comm.OpSend, buf, dst))
}

func (g *group) RecvAsync(ctx context.Context, buf comm.Buffer, src int) (comm.Work, error) {
	return g.runLater(g.message(ctx, comm.OpRecv, buf, src))
}

// BatchP2P posts every message of ops, in order, before waiting on any.
func (g *group) BatchP2P(ctx context.Context, ops []comm.P2POp) (comm.Work, error) {
	if err := comm.CheckBatchP2P(g, ops); err != nil {
		return nil, err
	}
	cs := make([]*call, 0, len(ops))
	for i, p := range ops {
		op := comm.OpSend
		if p.Kind == comm.Irecv {
			op = comm.OpRecv
		}
		c, err := g.message(ctx, op, p.Buf, p.Peer)
		if err != nil {
			for _, c := range cs {
				c.leak = true
				c.finish()
			}
			return nil, fmt.Errorf("BatchP2P ops[%d]: %w", i, err)
		}
		cs = append(cs, c)
	}
	return g.w.startWork(fmt.Sprintf("BatchP2P of %d messages on group %s", len(ops), g.label()), cs), nil
}
