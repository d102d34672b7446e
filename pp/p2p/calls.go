package p2p

import (
	"context"

	"github.com/gotron/gotron/tensor"
)

// The named calls of the reference's P2PCommunicator, one tensor each (the
// reference's list forms call the same exchange once per tensor). Shapes are
// those of the received tensor, (s, b, h); with VariableSeqLengths they may
// be nil. Stage flags are the schedule's (is_pp_first_stage, or with
// virtual pipelining "first pipeline rank and first model chunk"): on those
// stages the call does nothing and returns nil tensors. Every call waits
// unless it says otherwise.

// RecvForward receives the input activation from the previous stage
// (recv_forward). nil when isFirstStage.
func (c *Communicator) RecvForward(ctx context.Context, shape []int, isFirstStage bool) (*tensor.Tensor, error) {
	if isFirstStage {
		return nil, nil
	}
	defer c.time("forward-recv")()
	in, _, _, err := c.communicate(ctx, "recv_forward", Exchange{RecvPrev: true, Shape: shape})
	return in, err
}

// RecvBackward receives the output gradient from the next stage
// (recv_backward). nil when isLastStage.
func (c *Communicator) RecvBackward(ctx context.Context, shape []int, isLastStage bool) (*tensor.Tensor, error) {
	if isLastStage {
		return nil, nil
	}
	defer c.time("backward-recv")()
	_, grad, _, err := c.communicate(ctx, "recv_backward", Exchange{RecvNext: true, Shape: shape})
	return grad, err
}

// SendForward sends the output activation to the next stage
// (send_forward). Nothing when isLastStage or out is nil.
func (c *Communicator) SendForward(ctx context.Context, out *tensor.Tensor, isLastStage bool) error {
	if isLastStage {
		return nil
	}
	defer c.time("forward-send")()
	_, _, _, err := c.communicate(ctx, "send_forward", Exchange{SendNext: out})
	return err
}

// SendBackward sends the input gradient to the previous stage
// (send_backward). Nothing when isFirstStage or inGrad is nil.
func (c *Communicator) SendBackward(ctx context.Context, inGrad *tensor.Tensor, isFirstStage bool) error {
	if isFirstStage {
		return nil
	}
	defer c.time("backward-send")()
	_, _, _, err := c.communicate(ctx, "send_backward", Exchange{SendPrev: inGrad})
	return err
}

// SendForwardRecvBackward sends the output activation to the next stage and
// receives its gradient back (send_forward_recv_backward), the steady-state
// step of 1F1B. nil (and nothing sent) when isLastStage.
func (c *Communicator) SendForwardRecvBackward(ctx context.Context, out *tensor.Tensor, shape []int, isLastStage bool) (*tensor.Tensor, error) {
	if isLastStage {
		return nil, nil
	}
	defer c.time("forward-send-backward-recv")()
	_, grad, _, err := c.communicate(ctx, "send_forward_recv_backward", Exchange{SendNext: out, RecvNext: true, Shape: shape})
	return grad, err
}

// SendBackwardRecvForward sends the input gradient to the previous stage and
// receives the next input activation from it (send_backward_recv_forward).
// nil (and nothing sent) when isFirstStage.
func (c *Communicator) SendBackwardRecvForward(ctx context.Context, inGrad *tensor.Tensor, shape []int, isFirstStage bool) (*tensor.Tensor, error) {
	if isFirstStage {
		return nil, nil
	}
	defer c.time("backward-send-forward-recv")()
	in, _, _, err := c.communicate(ctx, "send_backward_recv_forward", Exchange{SendPrev: inGrad, RecvPrev: true, Shape: shape})
	return in, err
}

// SendForwardRecvForward sends out (unless nil) to the next stage and, if
// recvPrev, receives an input activation from the previous stage
// (send_forward_recv_forward, the interleaved schedule's forward step).
// With overlap (overlap_p2p_comm) it returns at once with the handles (see
// Communicate); otherwise the handles are nil.
func (c *Communicator) SendForwardRecvForward(ctx context.Context, out *tensor.Tensor, recvPrev bool, shape []int, overlap bool) (*tensor.Tensor, *Handles, error) {
	defer c.time("forward-send-forward-recv")()
	in, _, h, err := c.communicate(ctx, "send_forward_recv_forward", Exchange{SendNext: out, RecvPrev: recvPrev, Shape: shape, Async: overlap})
	return in, h, err
}

// SendBackwardRecvBackward sends inGrad (unless nil) to the previous stage
// and, if recvNext, receives an output gradient from the next stage
// (send_backward_recv_backward). With overlap it returns at once with the
// handles.
func (c *Communicator) SendBackwardRecvBackward(ctx context.Context, inGrad *tensor.Tensor, recvNext bool, shape []int, overlap bool) (*tensor.Tensor, *Handles, error) {
	defer c.time("backward-send-backward-recv")()
	_, grad, h, err := c.communicate(ctx, "send_backward_recv_backward", Exchange{SendPrev: inGrad, RecvNext: recvNext, Shape: shape, Async: overlap})
	return grad, h, err
}

// SendForwardBackwardRecvForwardBackward sends out to the next stage and
// inGrad to the previous one (either may be nil) and receives an input
// activation from the previous stage if recvPrev and an output gradient
// from the next if recvNext (send_forward_backward_recv_forward_backward,
// the interleaved schedule's steady-state step).
func (c *Communicator) SendForwardBackwardRecvForwardBackward(ctx context.Context, out, inGrad *tensor.Tensor, recvPrev, recvNext bool, shape []int) (in, outGrad *tensor.Tensor, err error) {
	defer c.time("forward-backward-send-forward-backward-recv")()
	in, outGrad, _, err = c.communicate(ctx, "send_forward_backward_recv_forward_backward",
		Exchange{SendNext: out, SendPrev: inGrad, RecvPrev: recvPrev, RecvNext: recvNext, Shape: shape})
	return in, outGrad, err
}

// time starts the named timer, at the reference's log level 2, and returns
// the function that stops it.
func (c *Communicator) time(name string) (stop func()) {
	if c.cfg.Timers == nil {
		return func() {}
	}
	t := c.cfg.Timers(name, 2)
	t.Start(false)
	return func() { t.Stop(false) }
}
