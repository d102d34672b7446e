package p2p

import (
	"context"
	"fmt"
	"slices"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// Exchange lists the ops of one exchange with the neighbouring stages (the
// arguments of the reference's _communicate).
type Exchange struct {
	// SendNext goes to the next stage (an output activation); nil sends
	// nothing. SendPrev goes to the previous stage (an input gradient).
	SendNext, SendPrev *tensor.Tensor
	// RecvPrev and RecvNext ask for a tensor from the previous and the next
	// stage.
	RecvPrev, RecvNext bool
	// Shape is the shape of the received tensors, e.g. (s, b, h). Required
	// for a receive unless the shapes are exchanged (VariableSeqLengths or
	// MTPStandalone), in which case it is ignored.
	Shape []int
	// ShapeNext, when set, is the shape of the tensor from the next stage
	// instead of Shape: a caller that knows both shapes, where they differ
	// (a gradient of another size than the activation received in the same
	// call), passes them here without a shape exchange.
	ShapeNext []int
	// Async returns the ops' handles instead of waiting for them (the
	// reference's wait_on_reqs=False, used with overlap_p2p_comm). Only for
	// unbatched exchanges (BatchP2PComm false).
	Async bool
}

// shape is the shape of the tensor received in direction d: ShapeNext
// from the next stage when set, else Shape.
func (ex Exchange) shape(d Dir) []int {
	if d == RecvNext && ex.ShapeNext != nil {
		return ex.ShapeNext
	}
	return ex.Shape
}

// Communicate performs one exchange and returns the tensors received from
// the previous and the next stage (nil for those not asked for).
//
// Without Async it returns once every op has completed, with nil Handles.
// With Async it returns as soon as the ops are issued: the received tensors
// are allocated but hold their values only after the matching Handle's Wait,
// and the sent tensors must not be modified before their Wait. (With the
// shape exchange the call still waits for the shapes of its receives.)
//
// # Shapes
//
// With VariableSeqLengths or MTPStandalone the shapes go first: each sent
// tensor's 3-dim shape as three int64s, each receive's shape taken from
// what arrives (a direction not received stays [0, 0, 0] in the reference;
// here there is simply no message). The shape messages are posted together,
// each as its own async op, whatever BatchP2PComm says; the tensor sends
// follow at once, as they need nothing from the peer; only the tensor
// receives wait for the shapes. So every rank posts all the shape messages
// of a call before waiting for any, and no send waits for a receive of its
// own call: the only dependency the shapes add is that a tensor receive is
// posted once the shapes of its call have arrived, which cannot deadlock
// for any P or batch mode when the peers' calls pair up as the schedules'
// do (and not even when a stage takes in two calls what its peer sends in
// one, see TestVariableShapes). The reference waits for its whole shape
// batch before posting any tensor, and orders that batch without regard
// to BatchP2PComm or its even/odd order, which hangs at P ≥ 4 (Megatron-LM
// issue #5100).
//
// # Order of the ops
//
// Batched (BatchP2PComm): the ops present are one comm BatchP2P, in the
// reference's order [send→prev, recv←prev, send→next, recv←next], and the
// call always waits. When P = 2 the previous and next stage are one rank,
// and comm matches messages between two ranks first in, first out: the
// reference's order would then pair this rank's gradient (send→prev) with
// the peer's activation receive (recv←prev), crossing the two tensors
// whenever both directions travel at once (the interleaved schedule's
// send_forward_backward_recv_forward_backward; the reference avoids it only
// by asking for P > 2 with interleaving unless overlap_p2p_comm is set, and
// its shape exchange crosses the shapes the same way, Megatron-LM PR #5271).
// For P = 2 gotron therefore posts send→next before send→prev, and the
// sends before the receives: [send→next, send→prev, recv←prev, recv←next].
// (Sends first: a batch completes as a whole, and a peer that waits for
// one of this batch's sends must not depend on a receive of the same
// batch.) For P > 2 the two peers differ and the order between them does not matter to
// the matching.
//
// Unbatched: one async comm op each, even stages in the order send→next,
// recv←prev, send→prev, recv←next and odd stages recv←prev, send→next,
// recv←next, send→prev, as in the reference. Both orders put the forward
// message before the backward one on each pair, so they agree when P = 2.
//
// The reference sends one direction through the WORLD group when P = 2,
// because NCCL runs the ops of one communicator in order on one stream, so
// the two directions between the same two ranks could not overlap. gotron
// does not: every comm op is its own pending operation, messages from a to b
// and from b to a are separate queues, and an op never waits for an earlier
// op of another pair or direction, so both directions already proceed at
// once. A second group would add nothing, and messages in two groups have no
// order between them, which the matching above relies on.
//
// # Errors
//
// Argument errors (a receive without a shape, a send on a one-stage
// pipeline, Async with BatchP2PComm, a shape not of 3 dims with the shape
// exchange) are returned before anything is sent. A failed message returns
// an *Error naming the call, the op, and the peer's stage and global rank.
func (c *Communicator) Communicate(ctx context.Context, ex Exchange) (fromPrev, fromNext *tensor.Tensor, h *Handles, err error) {
	return c.communicate(ctx, "communicate", ex)
}

// communicate is Communicate with the caller's name for errors.
func (c *Communicator) communicate(ctx context.Context, call string, ex Exchange) (fromPrev, fromNext *tensor.Tensor, h *Handles, err error) {
	var present [numDirs]bool
	present[SendPrev], present[RecvPrev] = ex.SendPrev != nil, ex.RecvPrev
	present[SendNext], present[RecvNext] = ex.SendNext != nil, ex.RecvNext
	if err := c.check(call, ex, present); err != nil {
		return nil, nil, nil, err
	}
	if !slices.Contains(present[:], true) {
		return nil, nil, nil, nil
	}
	if c.cfg.exchangesShapes() {
		fromPrev, fromNext, h, err = c.exchangeVariable(ctx, call, ex)
	} else {
		var ops [numDirs]*msg
		c.sends(ex, &ops)
		if ex.RecvPrev {
			fromPrev, ops[RecvPrev] = c.recvMsg(ex.Shape)
		}
		if ex.RecvNext {
			fromNext, ops[RecvNext] = c.recvMsg(ex.shape(RecvNext))
		}
		h, err = c.issue(ctx, call, phaseData, c.cfg.BatchP2PComm, &ops)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if ex.Async {
		return fromPrev, fromNext, h, nil
	}
	if err := h.WaitAll(ctx); err != nil {
		return nil, nil, nil, err
	}
	return fromPrev, fromNext, nil, nil
}

// check reports the argument errors of an exchange, before anything is
// sent.
func (c *Communicator) check(call string, ex Exchange, present [numDirs]bool) error {
	if ex.Async && c.cfg.BatchP2PComm {
		return fmt.Errorf("p2p: %s: overlap_p2p_comm (Async) needs unbatched messages, as batched exchanges always wait: set BatchP2PComm false", call)
	}
	for d, ok := range present {
		if ok && c.size == 1 {
			return fmt.Errorf("p2p: %s: %v in a pipeline of one stage, which has no neighbour; pass the stage flags (IsFirstStage, IsLastStage) so the call does nothing", call, Dir(d))
		}
	}
	variable := c.cfg.exchangesShapes()
	for _, d := range []Dir{RecvPrev, RecvNext} {
		if !present[d] || variable {
			continue
		}
		shape := ex.shape(d)
		if shape == nil {
			return fmt.Errorf("p2p: %s: %v needs the shape of the tensor to receive: pass it, typically (seq_length/cp [/tp with sequence parallelism], micro_batch_size, hidden_size), or set VariableSeqLengths to exchange shapes", call, d)
		}
		for _, n := range shape {
			if n < 0 {
				return fmt.Errorf("p2p: %s: %v shape %v has a negative dimension", call, d, shape)
			}
		}
	}
	if variable {
		for _, s := range []struct {
			d Dir
			t *tensor.Tensor
		}{{SendPrev, ex.SendPrev}, {SendNext, ex.SendNext}} {
			if s.t != nil && s.t.Rank() != shapeLen {
				return fmt.Errorf("p2p: %s: %v of a tensor of shape %v: the shape exchange (variable_seq_lengths, mtp_standalone) carries 3-dim shapes (s, b, h); reshape it to 3 dims", call, s.d, s.t.Shape())
			}
		}
	}
	return nil
}

// sends fills in the send messages of ex.
func (c *Communicator) sends(ex Exchange, ops *[numDirs]*msg) {
	if ex.SendPrev != nil {
		ops[SendPrev] = c.sendMsg(ex.SendPrev)
	}
	if ex.SendNext != nil {
		ops[SendNext] = c.sendMsg(ex.SendNext)
	}
}

// exchangeVariable issues ex with the shapes exchanged first: every shape
// message as its own async op, then at once the tensor sends (which need no
// shape from the peer), then, once the shapes have arrived, the tensor
// receives sized from them. It returns the handles of the tensor ops.
//
// Between two ranks every call issues its shape messages before its tensor
// messages, on both sides, so the first-in-first-out matching pairs them
// up. No send waits for a receive of the same call: the shape ops are not
// one comm batch because a batch completes as a whole, so a peer waiting
// for one of this call's shapes could be held up by another of its
// receives.
func (c *Communicator) exchangeVariable(ctx context.Context, call string, ex Exchange) (fromPrev, fromNext *tensor.Tensor, h *Handles, err error) {
	var shapes, sends, recvs [numDirs]*msg
	if ex.SendPrev != nil {
		shapes[SendPrev] = shapeMsg(ex.SendPrev)
	}
	if ex.SendNext != nil {
		shapes[SendNext] = shapeMsg(ex.SendNext)
	}
	if ex.RecvPrev {
		shapes[RecvPrev] = &msg{buf: comm.I64(make([]int64, shapeLen))}
	}
	if ex.RecvNext {
		shapes[RecvNext] = &msg{buf: comm.I64(make([]int64, shapeLen))}
	}
	sh, err := c.issue(ctx, call, phaseShapes, false, &shapes)
	if err != nil {
		return nil, nil, nil, err
	}
	c.sends(ex, &sends)
	hs, err := c.issue(ctx, call, phaseData, c.cfg.BatchP2PComm, &sends)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := sh.WaitAll(ctx); err != nil {
		return nil, nil, nil, err
	}
	if ex.RecvPrev {
		s, err := c.receivedShape(call, RecvPrev, shapes[RecvPrev])
		if err != nil {
			return nil, nil, nil, err
		}
		fromPrev, recvs[RecvPrev] = c.recvMsg(s)
	}
	if ex.RecvNext {
		s, err := c.receivedShape(call, RecvNext, shapes[RecvNext])
		if err != nil {
			return nil, nil, nil, err
		}
		fromNext, recvs[RecvNext] = c.recvMsg(s)
	}
	hr, err := c.issue(ctx, call, phaseData, c.cfg.BatchP2PComm, &recvs)
	if err != nil {
		return nil, nil, nil, err
	}
	return fromPrev, fromNext, merge(hs, hr), nil
}

// receivedShape decodes a received shape message.
func (c *Communicator) receivedShape(call string, d Dir, m *msg) ([]int, error) {
	s := make([]int, shapeLen)
	for i, v := range m.buf.Int64s() {
		if v < 0 {
			return nil, c.opError(call, phaseShapes, d, nil, fmt.Errorf("received shape %v has a negative dimension: the peer does not speak this protocol (is it a p2p.Communicator with the same VariableSeqLengths and MTPStandalone?)", m.buf.Int64s()))
		}
		s[i] = int(v)
	}
	return s, nil
}

// batchOrder is the order of the ops in a comm batch (see Communicate).
func (c *Communicator) batchOrder() [numDirs]Dir {
	if c.next == c.prev {
		return [numDirs]Dir{SendNext, SendPrev, RecvPrev, RecvNext}
	}
	return [numDirs]Dir{SendPrev, RecvPrev, SendNext, RecvNext}
}

// unbatchedOrder is the order of the async ops of an even or odd stage.
func (c *Communicator) unbatchedOrder() [numDirs]Dir {
	if c.rank%2 == 0 {
		return [numDirs]Dir{SendNext, RecvPrev, SendPrev, RecvNext}
	}
	return [numDirs]Dir{RecvPrev, SendNext, RecvNext, SendPrev}
}

// issue posts the present ops, as one comm batch or one async op each, and
// returns their handles (nil when there are none).
func (c *Communicator) issue(ctx context.Context, call string, shapes, batched bool, ops *[numDirs]*msg) (*Handles, error) {
	h := &Handles{}
	if batched {
		var batch []comm.P2POp
		var dirs []Dir
		for _, d := range c.batchOrder() {
			if m := ops[d]; m != nil {
				kind := comm.Irecv
				if d.IsSend() {
					kind = comm.Isend
				}
				batch = append(batch, comm.P2POp{Kind: kind, Buf: m.buf, Peer: c.peer(d)})
				dirs = append(dirs, d)
			}
		}
		if len(batch) == 0 {
			return nil, nil
		}
		w, err := c.g.BatchP2P(ctx, batch)
		if err != nil {
			return nil, c.opError(call, shapes, dirs[0], dirs[1:], err)
		}
		for _, d := range dirs {
			h.ops[d] = &Handle{c: c, call: call, shapes: shapes, dir: d, batch: dirs, work: w, finish: ops[d].finish}
		}
		return h, nil
	}
	for _, d := range c.unbatchedOrder() {
		m := ops[d]
		if m == nil {
			continue
		}
		var w comm.Work
		var err error
		if d.IsSend() {
			w, err = c.g.SendAsync(ctx, m.buf, c.peer(d))
		} else {
			w, err = c.g.RecvAsync(ctx, m.buf, c.peer(d))
		}
		if err != nil {
			return nil, c.opError(call, shapes, d, nil, err)
		}
		h.ops[d] = &Handle{c: c, call: call, shapes: shapes, dir: d, work: w, finish: m.finish}
	}
	return h, nil
}
