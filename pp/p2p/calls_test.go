package p2p

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor"
)

var shape = []int{3, 2, 4} // (s, b, h)

// TestCalls walks every named call through a pipeline of 2 and of 4
// stages, batched and unbatched, the way the 1F1B and interleaved
// schedules use them, and checks every received tensor and every stage
// no-op.
func TestCalls(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("P%d/%s", p, m.name), func(t *testing.T) {
				mustRun(t, p, f32(m.batched), func(ctx context.Context, c *Communicator) error {
					return callSequence(ctx, c)
				})
			})
		}
	}
}

// callSequence is one stage's part of TestCalls.
func callSequence(ctx context.Context, c *Communicator) error {
	r, first, last := c.Stage(), c.IsFirstStage(), c.IsLastStage()
	prev, next := c.Prev(), c.Next()
	var errs []error
	check := func(what string, got *tensor.Tensor, skip bool, want *tensor.Tensor) {
		if skip {
			errs = append(errs, expectNil(c, what, got))
		} else {
			errs = append(errs, expect(c, what, got, want))
		}
	}

	// A forward pass, then a backward pass, stage after stage.
	in, err := c.RecvForward(ctx, shape, first)
	if err != nil {
		return err
	}
	check("recv_forward", in, first, payload(prev, fwd, 0, shape...))
	if err := c.SendForward(ctx, payload(r, fwd, 0, shape...), last); err != nil {
		return err
	}
	grad, err := c.RecvBackward(ctx, shape, last)
	if err != nil {
		return err
	}
	check("recv_backward", grad, last, payload(next, bwd, 0, shape...))
	if err := c.SendBackward(ctx, payload(r, bwd, 0, shape...), first); err != nil {
		return err
	}

	// A stage gets its gradient alone (recv_backward) while the next stage
	// sends it within send_backward_recv_forward, whose receive waits for
	// this stage's next call: the send must not wait for that receive.
	in, err = c.RecvForward(ctx, shape, first)
	if err != nil {
		return err
	}
	check("recv_forward (unpaired)", in, first, payload(prev, fwd, 4, shape...))
	if err := c.SendForward(ctx, payload(r, fwd, 4, shape...), last); err != nil {
		return err
	}
	grad, err = c.RecvBackward(ctx, shape, last)
	if err != nil {
		return err
	}
	check("recv_backward (unpaired)", grad, last, payload(next, bwd, 4, shape...))
	in, err = c.SendBackwardRecvForward(ctx, payload(r, bwd, 4, shape...), shape, first)
	if err != nil {
		return err
	}
	check("send_backward_recv_forward (unpaired)", in, first, payload(prev, fwd, 5, shape...))
	grad, err = c.SendForwardRecvBackward(ctx, payload(r, fwd, 5, shape...), shape, last)
	if err != nil {
		return err
	}
	check("send_forward_recv_backward (unpaired)", grad, last, payload(next, bwd, 5, shape...))
	if err := c.SendBackward(ctx, payload(r, bwd, 5, shape...), first); err != nil {
		return err
	}

	// 1F1B's steady state: send forward and take the gradient, then send the
	// gradient back and take the next input.
	grad, err = c.SendForwardRecvBackward(ctx, payload(r, fwd, 1, shape...), shape, last)
	if err != nil {
		return err
	}
	check("send_forward_recv_backward", grad, last, payload(next, bwd, 1, shape...))
	in, err = c.SendBackwardRecvForward(ctx, payload(r, bwd, 1, shape...), shape, first)
	if err != nil {
		return err
	}
	check("send_backward_recv_forward", in, first, payload(prev, fwd, 1, shape...))

	// The interleaved schedule's calls, every stage at once, without the
	// wrap-around: the last stage sends no activation, the first no gradient.
	var out, inGrad *tensor.Tensor
	if !last {
		out = payload(r, fwd, 2, shape...)
	}
	if !first {
		inGrad = payload(r, bwd, 2, shape...)
	}
	in, h, err := c.SendForwardRecvForward(ctx, out, !first, shape, false)
	if err != nil {
		return err
	}
	if h != nil {
		errs = append(errs, fmt.Errorf("stage %d: send_forward_recv_forward without overlap returned handles %v", r, h.Dirs()))
	}
	check("send_forward_recv_forward", in, first, payload(prev, fwd, 2, shape...))
	grad, _, err = c.SendBackwardRecvBackward(ctx, inGrad, !last, shape, false)
	if err != nil {
		return err
	}
	check("send_backward_recv_backward", grad, last, payload(next, bwd, 2, shape...))
	in, grad, err = c.SendForwardBackwardRecvForwardBackward(ctx, out, inGrad, !first, !last, shape)
	if err != nil {
		return err
	}
	check("send_forward_backward_recv_forward_backward (in)", in, first, payload(prev, fwd, 2, shape...))
	check("send_forward_backward_recv_forward_backward (grad)", grad, last, payload(next, bwd, 2, shape...))

	// The ring: every stage sends and receives both ways, the last feeding
	// the first (the interleaved schedule's wrap-around between chunks).
	// With P = 2 both directions go between the same two ranks at once.
	in, grad, err = c.SendForwardBackwardRecvForwardBackward(ctx, payload(r, fwd, 3, shape...), payload(r, bwd, 3, shape...), true, true, shape)
	if err != nil {
		return err
	}
	check("ring (in)", in, false, payload(prev, fwd, 3, shape...))
	check("ring (grad)", grad, false, payload(next, bwd, 3, shape...))
	return errors.Join(errs...)
}

// TestStageNoOps checks that the stage-gated calls do nothing on a
// one-stage pipeline, where the stage is both first and last, and that the
// stage facts are right.
func TestStageNoOps(t *testing.T) {
	mustRun(t, 1, Config{}, func(ctx context.Context, c *Communicator) error {
		if !c.IsFirstStage() || !c.IsLastStage() || c.Next() != 0 || c.Prev() != 0 || c.NumStages() != 1 {
			return fmt.Errorf("one stage: first %v last %v next %d prev %d stages %d", c.IsFirstStage(), c.IsLastStage(), c.Next(), c.Prev(), c.NumStages())
		}
		x := payload(0, fwd, 0, shape...)
		var errs []error
		got, err := c.RecvForward(ctx, shape, true)
		errs = append(errs, err, expectNil(c, "recv_forward", got))
		got, err = c.RecvBackward(ctx, shape, true)
		errs = append(errs, err, expectNil(c, "recv_backward", got))
		errs = append(errs, c.SendForward(ctx, x, true), c.SendBackward(ctx, x, true))
		got, err = c.SendForwardRecvBackward(ctx, x, shape, true)
		errs = append(errs, err, expectNil(c, "send_forward_recv_backward", got))
		got, err = c.SendBackwardRecvForward(ctx, x, shape, true)
		errs = append(errs, err, expectNil(c, "send_backward_recv_forward", got))
		got, h, err := c.SendForwardRecvForward(ctx, nil, false, shape, false)
		errs = append(errs, err, expectNil(c, "send_forward_recv_forward", got))
		if h != nil {
			errs = append(errs, errors.New("empty exchange returned handles"))
		}
		return errors.Join(errs...)
	})
	mustRun(t, 4, f32(true), func(ctx context.Context, c *Communicator) error {
		r := c.Stage()
		if c.IsFirstStage() != (r == 0) || c.IsLastStage() != (r == 3) || c.Next() != (r+1)%4 || c.Prev() != (r+3)%4 {
			return fmt.Errorf("stage %d: first %v last %v next %d prev %d", r, c.IsFirstStage(), c.IsLastStage(), c.Next(), c.Prev())
		}
		return nil
	})
}

// recordingTimers records the timer calls of a communicator.
type recordingTimers struct{ log *[]string }

type recordingTimer struct {
	name string
	log  *[]string
}

func (r recordingTimer) Start(bool) { *r.log = append(*r.log, "start "+r.name) }
func (r recordingTimer) Stop(bool)  { *r.log = append(*r.log, "stop "+r.name) }

// TestTimers checks that a call is timed under the reference's name at log
// level 2, and that a stage no-op is not timed.
func TestTimers(t *testing.T) {
	logs := make([][]string, 2)
	levels := make([]int, 2)
	err := runPipeline(t, 2, f32(true), func(ctx context.Context, c *Communicator) error {
		r := c.Stage()
		cfg := c.Config()
		cfg.Timers = func(name string, level int) config.Timer {
			levels[r] = level
			return recordingTimer{name, &logs[r]}
		}
		c, err := New(c.Group(), cfg)
		if err != nil {
			return err
		}
		if _, err := c.RecvForward(ctx, shape, c.IsFirstStage()); err != nil {
			return err
		}
		return c.SendForward(ctx, payload(r, fwd, 0, shape...), c.IsLastStage())
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"start forward-send", "stop forward-send"}, {"start forward-recv", "stop forward-recv"}}
	for r := range logs {
		if fmt.Sprint(logs[r]) != fmt.Sprint(want[r]) || levels[r] != 2 {
			t.Errorf("stage %d: timers %q at level %d, want %q at level 2", r, logs[r], levels[r], want[r])
		}
	}
}
