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
// Messages are counted per ordered pair: the k-th Send from a to b is
// matched with b's k-th Recv from a. Each message uses two of the group's
// communicators, and each side posts both of its requests when it issues
// the operation:
//
//	p2p   the data. a posts MPI_Isend of its buffer to b with tag
//	      (k mod 2²⁹)·4 + dtype−1; b posts MPI_Irecv from a with
//	      MPI_ANY_TAG.
//	note  b's note of what it expects, two int64s {dtype, length}. b posts
//	      MPI_Isend of it to a with tag k mod (tagUB+1) when it issues
//	      Recv #k, before any data has arrived; a posts MPI_Irecv from b
//	      with that tag.
//
// MPI's non-overtaking rule (messages from one sender on one communicator
// match in the order sent) pairs the k-th data message with the k-th
// receive and the k-th note with the k-th send; the sequence number in the
// data's tag checks it. Since the note leaves when the receive is issued,
// usually before the data is even sent, it travels beside the data, not
// after it: a message costs one trip. (The note used to be a reply the
// receiver sent once the data had arrived, which put a second trip on
// every message's path: a 4KB ping-pong took 14.6µs so, 11.8µs with the
// note, medians on the 2-core development VM with today's poll.go.)
//
// A mismatch of dtype or length is seen by each side from what it already
// has, with no further message, and both return a *comm.MismatchError
// naming the sender as Rank and the receiver as Peer, with the sender's
// and the receiver's dtype and length (the receiver of a longer message
// knows only that it is longer):
//
//   - the receiver reads the sender's dtype from the data's tag and the
//     message's size from MPI_Get_count, or learns from MPI_ERR_TRUNCATE
//     that it was longer than the receive buffer (MPI then delivers the
//     part that fits, and the sender's MPI_Isend completes normally);
//   - the sender compares the receiver's note with its own buffer.
//
// Completion:
//
//   - a Send completes once its MPI_Isend has completed (MPI holds no
//     reference to the buffer) and the receiver's note has arrived (the
//     receiver has issued the matching Recv, and the sender knows whether
//     it matches). So a Send waits until the matching Recv is issued, as
//     comm.Group allows, but not for the receiver to see the data: a
//     receiver that fails after issuing its Recv may leave the Send
//     successful (MPI having buffered or delivered the data), and the
//     sender learns of the failure in its next call, as with MPI_Send.
//   - a Recv completes once the data has arrived and its note has left.
//
// Neither side waits for anything its peer does after issuing, so the
// calls of a batch may be run in any order (work.drive). Each side polls its
// requests with MPI_Test (call.wait; poll.go for the pacing).

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

// noteTag is the tag of message seq's note (on note); dataTag that of its
// data (on p2p), seqTag·4 + dtype−1.
func (g *group) noteTag(seq uint64) int { return int(seq % uint64(g.w.tagUB+1)) }

func (g *group) dataTag(seq uint64, dt comm.DType) int { return g.seqTag(seq)*4 + int(dt-1) }

func (g *group) seqTag(seq uint64) int { return int(seq % uint64((g.w.tagUB+1)/4)) }

// issueSend posts a Send's data and the receive of its receiver's note.
func (c *call) issueSend(buf comm.Buffer) error {
	g := c.g
	c.msg = buf
	c.theirs = c.mem.int64s(2)
	data, note := c.req(), c.req()
	if err := isend(pin(&c.pin, buf), buf.Bytes(), tByte, c.peer, g.dataTag(c.seq, buf.DType()), g.p2p, data); err != nil {
		return err
	}
	if err := irecv(addr(comm.I64(c.theirs)), 16, tByte, c.peer, g.noteTag(c.seq), g.note, note); err != nil {
		return err
	}
	c.body = (*call).sendBody
	return nil
}

// sendBody completes a Send: its data has left, and the receiver's note
// says whether the receiver agrees.
func (c *call) sendBody() error {
	data, note := c.reqs[0], c.reqs[1]
	if err := c.await(data, "MPI_Isend"); err != nil {
		return err
	}
	if err := c.await(note, "MPI_Irecv"); err != nil {
		return err
	}
	if dt := comm.DType(c.theirs[0]); dt != c.msg.DType() || c.theirs[1] != int64(c.msg.Len()) {
		return c.p2pMismatch(c.msg.String(), fmt.Sprintf("%v[%d]", dt, c.theirs[1]))
	}
	return nil
}

// issueRecv posts a Recv's data receive and sends its note.
func (c *call) issueRecv(buf comm.Buffer) error {
	g := c.g
	c.msg = buf
	mine := c.mem.int64s(2)
	mine[0], mine[1] = int64(buf.DType()), int64(buf.Len())
	data, note := c.req(), c.req()
	if err := irecv(pin(&c.pin, buf), buf.Bytes(), tByte, c.peer, -1, g.p2p, data); err != nil {
		return err
	}
	if err := isend(addr(comm.I64(mine)), 16, tByte, c.peer, g.noteTag(c.seq), g.note, note); err != nil {
		return err
	}
	c.body = (*call).recvBody
	return nil
}

// recvBody completes a Recv: the data has arrived, and its tag and size
// say whether the sender agrees; the note has left.
func (c *call) recvBody() error {
	data, note := c.reqs[0], c.reqs[1]
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
	if data.tag < 0 || data.tag/4 != c.g.seqTag(c.seq) {
		return c.mpiFailed(fmt.Errorf("received the message tagged %d where message #%d was due (a bug in package mpi)", data.tag, c.seq))
	}
	buf, dt := c.msg, comm.DType(data.tag%4+1)
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
	return g.w.startWork(batch{g, len(ops)}, cs), nil
}

// batch describes a BatchP2P's Work for hang reports.
type batch struct {
	g *group
	n int
}

func (b batch) doing() string {
	return fmt.Sprintf("BatchP2P of %d messages on group %s", b.n, b.g.label())
}
