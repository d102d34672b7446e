//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"time"

	"github.com/gotron/gotron/comm"
)

// Point-to-point messages.
//
// The protocol. Messages are counted per ordered pair: the k-th Send from
// a to b is matched with b's k-th Recv from a. Each message uses two of the
// group's communicators:
//
//	p2p  the data: a's MPI_Isend of the buffer with tag
//	     (k mod 2²⁹)·4 + dtype−1, received by b's MPI_Irecv from a with
//	     MPI_ANY_TAG;
//	ack  b's note for the receive, two int64s {dtype, length}: an
//	     MPI_Isend from b with tag k mod (tagUB+1), received by a's
//	     MPI_Irecv from b with that tag.
//
// Both sides post both of their requests when the operation is issued: b
// sends its note as soon as it issues Recv #k, before any data has
// arrived, so the note travels alongside the data instead of after it and
// a message costs one trip, not a data trip and then a reply trip. MPI's
// non-overtaking rule (messages between one pair on one communicator match
// in the order sent) pairs the k-th data message with the k-th receive and
// the k-th note with the k-th send; the sequence number in the tags is a
// check on that.
//
// A mismatch is seen by both sides, independently, from what each already
// has, and both return the same *comm.MismatchError:
//
//   - the receiver reads the sender's dtype from the data's tag and its
//     byte count from MPI_Get_count (or learns from MPI_ERR_TRUNCATE that
//     the message was longer than its buffer);
//   - the sender compares b's note with its own buffer.
//
// Completion. A Send completes once its MPI_Isend has completed (MPI
// holds no reference to the buffer) and the receiver's note has arrived
// (the receiver has issued the matching Recv, and the sender knows whether
// it matches): it may block until the matching Recv is posted, as
// comm.Group allows, but never waits for the receiver to finish. A Recv
// completes once the data has arrived and its note has left. Each side
// polls its requests with MPI_Test (call.wait, poll.go).

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
	var err error
	if op == comm.OpSend {
		err = c.issueSend(buf)
	} else {
		err = c.issueRecv(buf)
	}
	if err != nil {
		err = c.mpiFailed(err)
		c.finish()
		return nil, err
	}
	return c, nil
}

// noteTag is the tag of message seq's note on ack; dataTag that of its
// data on p2p.
func (g *group) noteTag(seq uint64) int { return int(seq % uint64(g.w.tagUB+1)) }

func (g *group) dataTag(seq uint64, dt comm.DType) int {
	return int(seq%uint64((g.w.tagUB+1)/4))*4 + int(dt-1)
}

// issueSend posts a Send's data and the receive of its receiver's note.
func (c *call) issueSend(buf comm.Buffer) error {
	g := c.g
	data, note := c.req(), c.req()
	if err := isend(pin(&c.pin, buf), buf.Bytes(), tByte, c.peer, g.dataTag(c.seq, buf.DType()), g.p2p, data); err != nil {
		return err
	}
	theirs := c.mem.int64s(2)
	if err := irecv(addr(comm.I64(theirs)), 16, tByte, c.peer, g.noteTag(c.seq), g.ack, note); err != nil {
		return err
	}
	c.body = func(c *call) error {
		if err := c.await(data, "MPI_Isend"); err != nil {
			return err
		}
		if err := c.await(note, "MPI_Irecv"); err != nil {
			return err
		}
		if dt := comm.DType(theirs[0]); dt != buf.DType() || theirs[1] != int64(buf.Len()) {
			return c.p2pMismatch(buf.String(), fmt.Sprintf("%v[%d]", dt, theirs[1]))
		}
		return nil
	}
	return nil
}

// issueRecv posts a Recv's data receive and sends its note.
func (c *call) issueRecv(buf comm.Buffer) error {
	g := c.g
	data, note := c.req(), c.req()
	if err := irecv(pin(&c.pin, buf), buf.Bytes(), tByte, c.peer, -1, g.p2p, data); err != nil {
		return err
	}
	mine := c.mem.int64s(2)
	mine[0], mine[1] = int64(buf.DType()), int64(buf.Len())
	if err := isend(addr(comm.I64(mine)), 16, tByte, c.peer, g.noteTag(c.seq), g.ack, note); err != nil {
		return err
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
		if err := c.await(note, "MPI_Isend"); err != nil {
			return err
		}
		seqTag := g.dataTag(c.seq, 1) / 4
		if data.tag < 0 || data.tag/4 != seqTag {
			return c.mpiFailed(fmt.Errorf("received the message tagged %d where message #%d was due (a bug in package mpi)", data.tag, c.seq))
		}
		dt := comm.DType(data.tag%4 + 1)
		if !long && dt == buf.DType() && data.nbytes == buf.Bytes() {
			return nil
		}
		var sent string
		switch {
		case long:
			sent = fmt.Sprintf("%v[more than %d]", dt, buf.Bytes()/dt.Size())
		case data.nbytes%dt.Size() != 0:
			sent = fmt.Sprintf("%v[%d bytes]", dt, data.nbytes)
		default:
			sent = fmt.Sprintf("%v[%d]", dt, data.nbytes/dt.Size())
		}
		return c.p2pMismatch(sent, buf.String())
	}
	return nil
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
