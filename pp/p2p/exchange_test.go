package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// TestOverlapHandles issues two exchanges without waiting (overlap_p2p_comm:
// every stage sends forward and backward around the ring, P = 2 with both
// directions between the same two ranks), waits for the ops out of order,
// and checks the handles and, after the waits, the tensors. With bfloat16
// the received tensor is filled by the wait.
func TestOverlapHandles(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, dt := range []config.DType{config.Float32, config.BFloat16} {
			t.Run(fmt.Sprintf("P%d/%v", p, dt), func(t *testing.T) {
				cfg := Config{PipelineDType: dt, OverlapP2PComm: true}
				mustRun(t, p, cfg, func(ctx context.Context, c *Communicator) error {
					return overlapSequence(ctx, c, dt)
				})
			})
		}
	}
}

func overlapSequence(ctx context.Context, c *Communicator, dt config.DType) error {
	r := c.Stage()
	in, fh, err := c.SendForwardRecvForward(ctx, payload(r, fwd, 0, shape...), true, shape, true)
	if err != nil {
		return err
	}
	grad, bh, err := c.SendBackwardRecvBackward(ctx, payload(r, bwd, 0, shape...), true, shape, true)
	if err != nil {
		return err
	}
	var errs []error
	if got := fh.Dirs(); !slices.Equal(got, []Dir{RecvPrev, SendNext}) {
		errs = append(errs, fmt.Errorf("stage %d: forward handles %v, want [recv_prev send_next]", r, got))
	}
	if got := bh.Dirs(); !slices.Equal(got, []Dir{SendPrev, RecvNext}) {
		errs = append(errs, fmt.Errorf("stage %d: backward handles %v, want [send_prev recv_next]", r, got))
	}
	if err := fh.Wait(ctx, RecvNext); err == nil {
		errs = append(errs, fmt.Errorf("stage %d: Wait for an op not issued returned nil", r))
	}
	// Backward first, then the forward receive alone (as the schedule pops
	// recv_prev to wait later), then everything.
	if err := bh.WaitAll(ctx); err != nil {
		return err
	}
	if err := fh.Get(RecvPrev).Wait(ctx); err != nil {
		return err
	}
	if err := fh.WaitAll(ctx); err != nil {
		return err
	}
	if err := fh.Wait(ctx, RecvPrev); err != nil { // again: a no-op
		return err
	}
	errs = append(errs,
		expect(c, "overlapped recv_prev", in, wire(dt, payload(c.Prev(), fwd, 0, shape...))),
		expect(c, "overlapped recv_next", grad, wire(dt, payload(c.Next(), bwd, 0, shape...))))
	return errors.Join(errs...)
}

// wire returns t as it arrives through the pipeline dtype dt: rounded to
// nearest even and widened back, with the tensor package's own conversions.
func wire(dt config.DType, t *tensor.Tensor) *tensor.Tensor {
	switch dt {
	case config.BFloat16:
		return tensor.ToHalf(t, tensor.BFloat16).Float32()
	case config.Float16:
		return tensor.ToHalf(t, tensor.Float16).Float32()
	}
	return t
}

// TestPipelineDType sends values that bfloat16 and float16 cannot hold
// through a 16-bit pipeline, both ways, batched and not, and compares them
// with one rounding of the sent values; the sender's tensors are left as
// they were.
func TestPipelineDType(t *testing.T) {
	for _, dt := range []config.DType{config.BFloat16, config.Float16} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("%v/%s", dt, m.name), func(t *testing.T) {
				cfg := Config{PipelineDType: dt, BatchP2PComm: m.batched}
				mustRun(t, 2, cfg, func(ctx context.Context, c *Communicator) error {
					r := c.Stage()
					out, g := payload(r, fwd, 0, shape...), payload(r, bwd, 0, shape...)
					in, grad, err := c.SendForwardBackwardRecvForwardBackward(ctx, out, g, true, true, shape)
					if err != nil {
						return err
					}
					wantIn := wire(dt, payload(c.Prev(), fwd, 0, shape...))
					if same(wantIn, payload(c.Prev(), fwd, 0, shape...)) == nil {
						return fmt.Errorf("test payload is exact in %v; it must need rounding", dt)
					}
					return errors.Join(
						expect(c, "in", in, wantIn),
						expect(c, "grad", grad, wire(dt, payload(c.Next(), bwd, 0, shape...))),
						expect(c, "sent activation unchanged", out, payload(r, fwd, 0, shape...)))
				})
			})
		}
	}
}

// TestHalfRounding pins the wire conversion to round-to-nearest-even on
// ties: 1 + 2⁻⁸ lies halfway between the bfloat16 values 1 and 1 + 2⁻⁷ and
// must round to 1 (even mantissa); 1 + 3·2⁻⁸ rounds up to 1 + 2⁻⁶.
func TestHalfRounding(t *testing.T) {
	x := tensor.FromSlice([]float32{1 + 1.0/256, 1 + 3.0/256, -2}, 1, 1, 3)
	want := []float32{1, 1 + 1.0/64, -2}
	mustRun(t, 2, Config{PipelineDType: config.BFloat16}, func(ctx context.Context, c *Communicator) error {
		if err := c.SendForward(ctx, x, c.IsLastStage()); err != nil {
			return err
		}
		in, err := c.RecvForward(ctx, []int{1, 1, 3}, c.IsFirstStage())
		if err != nil || in == nil {
			return err
		}
		if !slices.Equal(in.Data(), want) {
			return fmt.Errorf("received %v, want %v", in.Data(), want)
		}
		return nil
	})
	// The same conversion, directly.
	bits := make([]uint16, 3)
	kernels.F32ToBF16(bits, x.Data())
	back := make([]float32, 3)
	kernels.BF16ToF32(back, bits)
	if !slices.Equal(back, want) {
		t.Fatalf("kernels round trip %v, want %v", back, want)
	}
}

// TestVariableShapes exchanges tensors whose shapes change with the sender,
// the direction and the step, with receivers passing no shape: a pipeline
// of 4 (every stage sending both ways around the ring at once, and the
// 1F1B calls) and of 2 (where the reference crosses the two shapes),
// batched and unbatched, with variable_seq_lengths and with mtp_standalone.
func TestVariableShapes(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, m := range modes {
			for _, mtp := range []bool{false, true} {
				t.Run(fmt.Sprintf("P%d/%s/mtp=%v", p, m.name, mtp), func(t *testing.T) {
					cfg := f32(m.batched)
					cfg.VariableSeqLengths, cfg.MTPStandalone = !mtp, mtp
					mustRun(t, p, cfg, variableSequence)
				})
			}
		}
	}
}

// varShape is the shape stage `from` sends as kind at step.
func varShape(from, kind, step int) []int { return []int{1 + from + 2*kind + step, 2, kind} }

func variableSequence(ctx context.Context, c *Communicator) error {
	r, prev, next := c.Stage(), c.Prev(), c.Next()
	for step := range 3 {
		in, grad, err := c.SendForwardBackwardRecvForwardBackward(ctx,
			payload(r, fwd, step, varShape(r, fwd, step)...), payload(r, bwd, step, varShape(r, bwd, step)...), true, true, nil)
		if err != nil {
			return err
		}
		if err := errors.Join(
			expect(c, fmt.Sprintf("step %d in", step), in, payload(prev, fwd, step, varShape(prev, fwd, step)...)),
			expect(c, fmt.Sprintf("step %d grad", step), grad, payload(next, bwd, step, varShape(next, bwd, step)...)),
		); err != nil {
			return err
		}
	}
	// Two microbatches of 1F1B with the shapes exchanged: forward and
	// backward of microbatch 0, then microbatch 1 in the steady-state calls.
	first, last := c.IsFirstStage(), c.IsLastStage()
	fw := func(from, mb int) *tensor.Tensor { return payload(from, fwd, 10+mb, varShape(from, fwd, 10+mb)...) }
	bw := func(from, mb int) *tensor.Tensor { return payload(from, bwd, 10+mb, varShape(from, bwd, 10+mb)...) }
	in0, err := c.RecvForward(ctx, nil, first)
	if err != nil {
		return err
	}
	if err := c.SendForward(ctx, fw(r, 0), last); err != nil {
		return err
	}
	grad0, err := c.RecvBackward(ctx, nil, last)
	if err != nil {
		return err
	}
	in1, err := c.SendBackwardRecvForward(ctx, bw(r, 0), nil, first)
	if err != nil {
		return err
	}
	grad1, err := c.SendForwardRecvBackward(ctx, fw(r, 1), nil, last)
	if err != nil {
		return err
	}
	if err := c.SendBackward(ctx, bw(r, 1), first); err != nil {
		return err
	}
	var errs []error
	for _, x := range []struct {
		what string
		got  *tensor.Tensor
		skip bool
		want *tensor.Tensor
	}{
		{"recv_forward", in0, first, fw(prev, 0)},
		{"recv_backward", grad0, last, bw(next, 0)},
		{"send_backward_recv_forward", in1, first, fw(prev, 1)},
		{"send_forward_recv_backward", grad1, last, bw(next, 1)},
	} {
		if x.skip {
			errs = append(errs, expectNil(c, x.what, x.got))
		} else {
			errs = append(errs, expect(c, x.what, x.got, x.want))
		}
	}
	return errors.Join(errs...)
}

// TestShapeNext: in one exchange the middle stage of three receives an
// activation of one shape from the previous stage and a gradient of
// another from the next (ShapeNext), batched and not, without a shape
// exchange; a receive from the next stage falls back to Shape without it.
func TestShapeNext(t *testing.T) {
	fill := func(shape ...int) *tensor.Tensor {
		x := tensor.New(shape...)
		for i := range x.Data() {
			x.Data()[i] = float32(i + 1)
		}
		return x
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			mustRun(t, 3, f32(m.batched), func(ctx context.Context, c *Communicator) error {
				switch c.rank {
				case 0:
					_, _, _, err := c.Communicate(ctx, Exchange{SendNext: fill(2, 1, 3)})
					return err
				case 2:
					_, _, _, err := c.Communicate(ctx, Exchange{SendPrev: fill(4, 1, 3)})
					return err
				}
				prev, next, _, err := c.Communicate(ctx, Exchange{RecvPrev: true, RecvNext: true, Shape: []int{2, 1, 3}, ShapeNext: []int{4, 1, 3}})
				if err != nil {
					return err
				}
				if !slices.Equal(prev.Shape(), []int{2, 1, 3}) || !slices.Equal(prev.Data(), fill(2, 1, 3).Data()) || !slices.Equal(next.Shape(), []int{4, 1, 3}) || !slices.Equal(next.Data(), fill(4, 1, 3).Data()) {
					return fmt.Errorf("received %v and %v, want the [2 1 3] and [4 1 3] sent", prev, next)
				}
				return nil
			})
		})
	}
	if got := (Exchange{Shape: []int{1, 2, 3}}).shape(RecvNext); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("RecvNext without ShapeNext: %v, want Shape", got)
	}
}
