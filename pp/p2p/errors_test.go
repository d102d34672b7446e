package p2p

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
)

// wantErr checks that err is an error whose text holds every part.
func wantErr(err error, parts ...string) error {
	if err == nil {
		return fmt.Errorf("got no error, want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return fmt.Errorf("error %q does not mention %q", err, p)
		}
	}
	return nil
}

// TestNewErrors checks New's refusals.
func TestNewErrors(t *testing.T) {
	if _, err := New(nil, Config{}); wantErr(err, "nil pipeline group") != nil {
		t.Error(wantErr(err, "nil pipeline group"))
	}
	cases := []struct {
		cfg   Config
		parts []string
	}{
		{Config{PipelineDType: config.DType(9)}, []string{"PipelineDType", "not a dtype"}},
		{Config{}, []string{"pipeline_dtype must be set", "2 pipeline stages", "PipelineDType"}},
		{Config{PipelineDType: config.Float32, OverlapP2PComm: true, BatchP2PComm: true}, []string{"overlap_p2p_comm", "BatchP2PComm false"}},
	}
	for _, tc := range cases {
		err := runPipeline(t, 2, tc.cfg, func(ctx context.Context, c *Communicator) error { return nil })
		if err := wantErr(err, tc.parts...); err != nil {
			t.Error(err)
		}
	}
	// One stage needs no pipeline dtype.
	mustRun(t, 1, Config{}, func(ctx context.Context, c *Communicator) error { return nil })
}

// TestArgumentErrors checks the errors reported before anything is sent:
// the peer issues nothing and the world ends cleanly.
func TestArgumentErrors(t *testing.T) {
	x := payload(0, fwd, 0, shape...)
	flat := payload(0, fwd, 0, 24)
	variable := f32(false)
	variable.VariableSeqLengths = true
	cases := []struct {
		name  string
		cfg   Config
		call  func(ctx context.Context, c *Communicator) error
		parts []string
	}{
		{"no shape", f32(true), func(ctx context.Context, c *Communicator) error {
			_, err := c.RecvForward(ctx, nil, false)
			return err
		}, []string{"recv_forward", "recv_prev needs the shape", "VariableSeqLengths"}},
		{"no shape, backward", f32(false), func(ctx context.Context, c *Communicator) error {
			_, err := c.SendForwardRecvBackward(ctx, x, nil, false)
			return err
		}, []string{"send_forward_recv_backward", "recv_next needs the shape"}},
		{"negative shape", f32(true), func(ctx context.Context, c *Communicator) error {
			_, err := c.RecvBackward(ctx, []int{3, -1, 4}, false)
			return err
		}, []string{"recv_backward", "negative dimension"}},
		{"overlap batched", f32(true), func(ctx context.Context, c *Communicator) error {
			_, _, err := c.SendForwardRecvForward(ctx, x, true, shape, true)
			return err
		}, []string{"send_forward_recv_forward", "BatchP2PComm false"}},
		{"2-dim with shape exchange", variable, func(ctx context.Context, c *Communicator) error {
			return c.SendForward(ctx, flat, false)
		}, []string{"send_forward", "send_next", "[24]", "3-dim"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustRun(t, 2, tc.cfg, func(ctx context.Context, c *Communicator) error {
				if c.Stage() != 1 {
					return nil
				}
				return wantErr(tc.call(ctx, c), tc.parts...)
			})
		})
	}
	t.Run("one stage", func(t *testing.T) {
		mustRun(t, 1, Config{PipelineDType: config.Float32}, func(ctx context.Context, c *Communicator) error {
			return wantErr(c.SendForward(ctx, x, false), "send_forward", "one stage", "IsLastStage")
		})
	})
	var h *Handles
	if err := wantErr(h.Wait(context.Background(), RecvPrev), "no recv_prev op"); err != nil {
		t.Error(err)
	}
	if h.Has(SendNext) || h.WaitAll(context.Background()) != nil || len(h.Dirs()) != 0 {
		t.Error("nil Handles must have no ops")
	}
}

// TestPeerFailure fails stage 2 of a 4-stage pipeline, either before its
// exchange or halfway through it (its send to the next stage issued, its
// receives not), while the other stages exchange around the ring. Its
// neighbours must return an *Error naming the call and the peers, wrapping
// the *comm.PeerError of the failed stage, and no stage may hang: the world
// timeout is 30 s, and a *comm.TimeoutError would mean a stage waited for it.
// The pipeline group is the world in reverse, so stage s is global rank
// 3−s and the errors must tell the two apart.
func TestPeerFailure(t *testing.T) {
	lost := errors.New("stage 2 lost its node")
	for _, m := range modes {
		for _, variable := range []bool{false, true} {
			for _, mid := range []bool{false, true} {
				if mid && m.batched {
					continue // a batched exchange cannot be left half done
				}
				t.Run(fmt.Sprintf("%s/variable=%v/mid=%v", m.name, variable, mid), func(t *testing.T) {
					cfg := f32(m.batched)
					cfg.VariableSeqLengths = variable
					err := runReversed(t, 4, cfg, func(ctx context.Context, c *Communicator) error {
						r := c.Stage()
						ring := func(step int) error {
							_, _, err := c.SendForwardBackwardRecvForwardBackward(ctx, payload(r, fwd, step, shape...), payload(r, bwd, step, shape...), true, true, shape)
							return err
						}
						if err := ring(0); err != nil {
							return fmt.Errorf("healthy step: %w", err)
						}
						if r == 2 {
							if mid {
								if _, _, _, err := c.Communicate(ctx, Exchange{SendNext: payload(r, fwd, 1, shape...), Async: true}); err != nil {
									return err
								}
							}
							return lost
						}
						return ring(1)
					})
					errs := rankErrors(t, err)
					for global, err := range errs {
						stage := 3 - global
						switch {
						case stage == 2:
							if !errors.Is(err, lost) {
								t.Errorf("stage 2: %v, want its own failure", err)
							}
						case stage == 1 || stage == 3:
							if err := checkPeerError(err, stage); err != nil {
								t.Error(err)
							}
						case err != nil:
							if pe := (*comm.PeerError)(nil); !errors.As(err, &pe) {
								t.Errorf("stage 0: %v, want nil or a *comm.PeerError", err)
							}
						}
					}
				})
			}
		}
	}
}

// checkPeerError checks the error of a neighbour of the failed stage 2
// (global rank 1). Once the world has failed every pending op fails, so the
// op named may be the one with the healthy neighbour.
func checkPeerError(err error, stage int) error {
	var pe *comm.PeerError
	var e *Error
	if !errors.As(err, &e) || !errors.As(err, &pe) {
		return fmt.Errorf("stage %d: %T %v, want a *p2p.Error wrapping a *comm.PeerError", stage, err, err)
	}
	if pe.FailedRank != 1 {
		return fmt.Errorf("stage %d: PeerError names global rank %d, want 1 (stage 2)", stage, pe.FailedRank)
	}
	if e.Stage != stage || e.GlobalRank != 3-stage || e.PrevGlobalRank != 3-e.Prev || e.NextGlobalRank != 3-e.Next ||
		e.Call != "send_forward_backward_recv_forward_backward" {
		return fmt.Errorf("stage %d: wrong fields in %+v", stage, *e)
	}
	peer := e.Prev
	if e.Dir == SendNext || e.Dir == RecvNext {
		peer = e.Next
	}
	return wantErr(err, "send_forward_backward_recv_forward_backward", e.Dir.String(),
		fmt.Sprintf("stage %d (global rank %d)", peer, 3-peer),
		fmt.Sprintf("on stage %d (global rank %d)", stage, 3-stage), `"pp" [3 2 1 0]`, "global rank 1 failed")
}

// runReversed is runPipeline over a pipeline group that lists the world's
// ranks in reverse.
func runReversed(t *testing.T, p int, cfg Config, fn func(ctx context.Context, c *Communicator) error) error {
	t.Helper()
	rev := make([]int, p)
	for i := range rev {
		rev[i] = p - 1 - i
	}
	return runWorld(t, p, func(ctx context.Context, world comm.Group) error {
		pp, err := world.NewSubgroups(ctx, "pp", [][]int{rev})
		if err != nil {
			return err
		}
		c, err := New(pp, cfg)
		if err != nil {
			return err
		}
		return fn(ctx, c)
	})
}

// TestConfigMismatch gives the two stages different settings: each must
// get an error (comm's mismatch of the message types), not hang.
func TestConfigMismatch(t *testing.T) {
	bf16 := f32(true)
	bf16.PipelineDType = config.BFloat16
	variable := f32(true)
	variable.VariableSeqLengths = true
	for _, tc := range []struct {
		name   string
		sender Config
	}{{"pipeline dtype", bf16}, {"shape exchange", variable}} {
		t.Run(tc.name, func(t *testing.T) {
			err := runPipeline(t, 2, f32(true), func(ctx context.Context, c *Communicator) error {
				if c.Stage() == 0 {
					s, err := New(c.Group(), tc.sender)
					if err != nil {
						return err
					}
					c = s
				}
				if err := c.SendForward(ctx, payload(0, fwd, 0, shape...), c.IsLastStage()); err != nil {
					return err
				}
				_, err := c.RecvForward(ctx, shape, c.IsFirstStage())
				return err
			})
			for r, err := range rankErrors(t, err) {
				var me *comm.MismatchError
				var e *Error
				if !errors.As(err, &me) || !errors.As(err, &e) {
					t.Errorf("stage %d: %v, want a *p2p.Error wrapping a *comm.MismatchError", r, err)
				}
			}
		})
	}
}
