package tp

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// Sizes of the linear tests: [s, b, in] → [s, b, out]; s, in and out are
// divisible by 1, 2 and 4, and in/4 and out/4 by 3 (stride-3 cases).
const (
	ltS   = 4
	ltB   = 3
	ltIn  = 12
	ltOut = 24
)

// ltTol is the relative tolerance where a sum is split across ranks (the
// partial sums are added in a different order than the serial GEMM's).
const ltTol = 1e-6

// ltInit draws a master weight from seed; every call draws the same values.
func ltInit(seed uint64) InitMethod {
	return func(m *tensor.Tensor) { rng.New(seed).FillNormal(m.Data(), 0, 0.3) }
}

// ltSerial runs nn.Linear on one rank: y = x·Wᵀ (+ b) and its gradients
// for the output gradient dy (db is nil without b).
func ltSerial(t *testing.T, w, b, x, dy *tensor.Tensor) (y, dx, dw, db *tensor.Tensor) {
	t.Helper()
	tape := autograd.NewTape(context.Background())
	xv := autograd.NewLeaf(x.Clone(), "x", true)
	wv := autograd.NewLeaf(w.Clone(), "w", true)
	var bv *autograd.Var
	if b != nil {
		bv = autograd.NewLeaf(b.Clone(), "b", true)
	}
	yv := nn.Linear(tape, xv, wv, bv)
	if err := autograd.Backward(tape, yv, dy); err != nil {
		t.Fatal(err)
	}
	if bv != nil {
		db = bv.Grad
	}
	return yv.Value, xv.Grad, wv.Grad, db
}

// ltShard returns rank r's contiguous chunk of n along dim.
func ltShard(x *tensor.Tensor, dim, r, n int) *tensor.Tensor {
	c := x.Dim(dim) / n
	return x.Narrow(dim, r*c, c).Contiguous()
}

// ltStrided returns rank r's part of master split along dim into n·stride
// chunks: chunks r, r+n, r+2n, … concatenated (written independently of
// InitializeAffineWeightCPU).
func ltStrided(master *tensor.Tensor, dim, stride, r, n int) *tensor.Tensor {
	c := master.Dim(dim) / (n * stride)
	var parts []*tensor.Tensor
	for j := 0; j < stride; j++ {
		parts = append(parts, master.Narrow(dim, (r+j*n)*c, c))
	}
	return tensor.Cat(dim, parts...)
}

// ltUnstrided inverts ltStrided: it rebuilds the whole tensor from the
// ranks' parts.
func ltUnstrided(parts []*tensor.Tensor, dim, stride int) *tensor.Tensor {
	n := len(parts)
	c := parts[0].Dim(dim) / stride
	var chunks []*tensor.Tensor
	for k := 0; k < n*stride; k++ {
		chunks = append(chunks, parts[k%n].Narrow(dim, (k/n)*c, c))
	}
	return tensor.Cat(dim, chunks...)
}

// ltSum returns the element-wise sum of ts, in order.
func ltSum(ts []*tensor.Tensor) *tensor.Tensor {
	s := ts[0].Clone()
	for _, x := range ts[1:] {
		d, xd := s.Data(), x.Contiguous().Data()
		for i := range d {
			d[i] += xd[i]
		}
	}
	return s
}

// ltCompare checks got against want, bitwise or within ltTol.
func ltCompare(t *testing.T, what string, got, want *tensor.Tensor, bitwise bool) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: got %v, want %v (one is missing)", what, got != nil, want != nil)
	}
	if !reflect.DeepEqual(got.Shape(), want.Shape()) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape(), want.Shape())
	}
	if bitwise {
		numtest.SameBits(t, what, got.Contiguous().Data(), want.Contiguous().Data())
		return
	}
	g, w := got.Contiguous().Data(), want.Contiguous().Data()
	numtest.CloseNorm(t, what, g, w, ltTol)
	var num, den, maxAbs float64
	differ := 0
	for i := range g {
		d := float64(g[i]) - float64(w[i])
		num, den, maxAbs = num+d*d, den+float64(w[i])*float64(w[i]), max(maxAbs, math.Abs(d))
		if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
			differ++
		}
	}
	t.Logf("%s: relative difference %.3g, max |diff| %.3g, %d of %d elements not bitwise (tolerance %g)", what, math.Sqrt(num/den), maxAbs, differ, len(g), ltTol)
}

// On one rank (a nil group and a group of one) the core is nn.Linear,
// bitwise: output, input gradient, and the weight and bias gradients
// accumulated over two backward passes.
func TestLinearCoreOneRankBitwise(t *testing.T) {
	x := randn(1, 1, ltS, ltB, ltIn)
	w := randn(2, 0.3, ltOut, ltIn)
	b := randn(3, 1, ltOut)
	dy := randn(4, 1, ltS, ltB, ltOut)
	for _, withBias := range []bool{true, false} {
		for _, sp := range []bool{false, true} {
			t.Run(fmt.Sprintf("bias=%v/sp=%v", withBias, sp), func(t *testing.T) {
				ref := func() (*autograd.Var, *autograd.Var, *autograd.Var, *autograd.Var) {
					tape := autograd.NewTape(context.Background())
					xv := autograd.NewLeaf(x.Clone(), "x", true)
					wv := autograd.NewLeaf(w.Clone(), "w", true)
					var bv *autograd.Var
					if withBias {
						bv = autograd.NewLeaf(b.Clone(), "b", true)
					}
					var y *autograd.Var
					for range 2 {
						y = nn.Linear(tape, xv, wv, bv)
						if err := autograd.Backward(tape, y, dy); err != nil {
							t.Fatal(err)
						}
					}
					return y, xv, wv, bv
				}
				yr, xr, wr, br := ref()
				runRanks(t, 1, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
					for _, grp := range []comm.Group{nil, g} {
						xv := autograd.NewLeaf(x.Clone(), "x", true)
						wv := autograd.NewLeaf(w.Clone(), "w", true)
						var bv *autograd.Var
						if withBias {
							bv = autograd.NewLeaf(b.Clone(), "b", true)
						}
						var y *autograd.Var
						for range 2 {
							y = LinearWithGradAccumulationAndAsyncAllreduce(tape, xv, wv, bv, LinearOptions{Group: grp, SequenceParallel: sp})
							if err := autograd.Backward(tape, y, dy); err != nil {
								return err
							}
						}
						ltCompare(t, "output", y.Value, yr.Value, true)
						ltCompare(t, "input grad", xv.Grad, xr.Grad, true)
						ltCompare(t, "weight grad", wv.Grad, wr.Grad, true)
						if withBias {
							ltCompare(t, "bias grad", bv.Grad, br.Grad, true)
						}
					}
					return nil
				})
			})
		}
	}
}

// TestLinearCoreUnfusedWeightGrad: with UnfusedWeightGrad the core's
// weight gradient is nn.LinearFn's unfused one, bitwise, over two backward
// passes, in float32 and with a bfloat16 weight; in bfloat16 it differs
// from the fused gradient (the product is rounded to 16 bits before it is
// added), so the option reaches the GEMM.
func TestLinearCoreUnfusedWeightGrad(t *testing.T) {
	x := randn(1, 1, ltS, ltB, ltIn)
	w := randn(2, 0.3, ltOut, ltIn)
	dy := randn(4, 1, ltS, ltB, ltOut)
	for _, d := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		t.Run(d.String(), func(t *testing.T) {
			weight := func() *autograd.Var {
				v := w.Clone()
				if d != tensor.Float32 {
					v = tensor.ToHalf(v, d)
				}
				return autograd.NewLeaf(v, "w", true)
			}
			tape := autograd.NewTape(context.Background())
			wr := weight()
			for range 2 {
				y := autograd.Apply(tape, nn.LinearFn{W: wr, UnfusedWeightGrad: true}, autograd.NewLeaf(x.Clone(), "x", false), wr)
				if err := autograd.Backward(tape, y, dy); err != nil {
					t.Fatal(err)
				}
			}
			runRanks(t, 1, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
				grads := map[bool]*tensor.Tensor{}
				for _, unfused := range []bool{true, false} {
					wv := weight()
					for range 2 {
						y := LinearWithGradAccumulationAndAsyncAllreduce(tape, autograd.NewLeaf(x.Clone(), "x", false), wv, nil, LinearOptions{Group: g, UnfusedWeightGrad: unfused})
						if err := autograd.Backward(tape, y, dy); err != nil {
							return err
						}
					}
					grads[unfused] = wv.Grad
				}
				ltCompare(t, "unfused weight grad", grads[true], wr.Grad, true)
				if d != tensor.Float32 && slices.Equal(grads[true].Data(), grads[false].Data()) {
					t.Error("the unfused bfloat16 weight gradient equals the fused one: the product was not rounded")
				}
				return nil
			})
		})
	}
}

func TestLinearCoreErrors(t *testing.T) {
	x := autograd.NewLeaf(randn(1, 1, ltS, ltIn), "x", true)
	w := autograd.NewLeaf(randn(2, 1, ltOut, ltIn), "w", true)
	cases := []struct {
		name string
		run  func(tape *autograd.Tape)
		want string
	}{
		{"non-leaf weight", func(tape *autograd.Tape) {
			LinearWithGradAccumulationAndAsyncAllreduce(tape, x, autograd.View(tape, w, ltOut, ltIn), nil, LinearOptions{})
		}, "is the output of another operation"},
		{"non-leaf bias", func(tape *autograd.Tape) {
			b := autograd.NewLeaf(randn(3, 1, ltOut), "b", true)
			LinearWithGradAccumulationAndAsyncAllreduce(tape, x, w, autograd.Scale(tape, b, 2), LinearOptions{})
		}, "is the output of another operation"},
		{"allreduce with sp", func(tape *autograd.Tape) {
			LinearWithGradAccumulationAndAsyncAllreduce(tape, x, w, nil, LinearOptions{AllreduceDgrad: true, SequenceParallel: true})
		}, "AllreduceDgrad and SequenceParallel cannot be enabled at the same time"},
		{"input width", func(tape *autograd.Tape) {
			LinearWithGradAccumulationAndAsyncAllreduce(tape, autograd.NewLeaf(tensor.New(2, 5), "x", true), w, nil, LinearOptions{})
		}, "last dimension must be the weight's in = 12"},
		{"bias shape", func(tape *autograd.Tape) {
			LinearWithGradAccumulationAndAsyncAllreduce(tape, x, w, autograd.NewLeaf(tensor.New(5), "b", true), LinearOptions{})
		}, "bias has shape [5], want [24]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tape := autograd.NewTape(context.Background())
			c.run(tape)
			if err := tape.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	// A frozen weight may be the output of another operation.
	tape := autograd.NewTape(context.Background())
	y := LinearWithFrozenWeight(tape, x, autograd.View(tape, w, ltOut, ltIn), nil, LinearOptions{})
	if err := tape.Err(); err != nil || y.Value == nil {
		t.Fatalf("frozen non-leaf weight: %v", err)
	}
}

// The frozen-weight core gives the same output and input gradient as the
// trainable one (bitwise: the same GEMMs and the same collectives) and
// leaves the weight and bias gradients alone, with and without SP, on 1,
// 2 and 4 ranks.
func TestLinearWithFrozenWeight(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		for _, sp := range []bool{false, true} {
			t.Run(fmt.Sprintf("tp=%d/sp=%v", n, sp), func(t *testing.T) {
				runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
					r := g.Rank()
					xs := ltS
					if sp {
						xs = ltS / n
					}
					x := randn(uint64(10+r), 1, xs, ltB, ltIn)
					w := randn(uint64(20+r), 0.3, ltOut/n, ltIn)
					b := randn(uint64(30+r), 1, ltOut/n)
					dy := randn(uint64(40+r), 1, ltS, ltB, ltOut/n)
					opts := LinearOptions{Group: g, SequenceParallel: sp, AllreduceDgrad: !sp && n > 1}
					run := func(frozen bool) (*autograd.Var, *autograd.Var, *autograd.Var, *autograd.Var) {
						xv := autograd.NewLeaf(x.Clone(), "x", true)
						wv := autograd.NewLeaf(w.Clone(), "w", true)
						bv := autograd.NewLeaf(b.Clone(), "b", true)
						var y *autograd.Var
						if frozen {
							y = LinearWithFrozenWeight(tape, xv, wv, bv, opts)
						} else {
							y = LinearWithGradAccumulationAndAsyncAllreduce(tape, xv, wv, bv, opts)
						}
						if err := autograd.Backward(tape, y, dy); err != nil {
							t.Error(err)
						}
						return y, xv, wv, bv
					}
					y0, x0, _, _ := run(false)
					y1, x1, w1, b1 := run(true)
					ltCompare(t, "output", y1.Value, y0.Value, true)
					ltCompare(t, "input grad", x1.Grad, x0.Grad, true)
					if w1.Grad != nil || b1.Grad != nil {
						t.Errorf("frozen weight: weight grad %v, bias grad %v, want none", w1.Grad != nil, b1.Grad != nil)
					}
					return tape.Err()
				})
			})
		}
	}
}

// ltSpyGroup wraps a group and logs, at every issue and Wait of an async
// collective, whether the weight gradient has been computed yet.
type ltSpyGroup struct {
	comm.Group
	w   *autograd.Var
	log []string
}

func (s *ltSpyGroup) note(what string) {
	s.log = append(s.log, fmt.Sprintf("%s wgrad=%v", what, s.w.Grad != nil))
}

type ltSpyWork struct {
	comm.Work
	s    *ltSpyGroup
	what string
}

func (w ltSpyWork) Wait(ctx context.Context) error {
	w.s.note("wait " + w.what)
	return w.Work.Wait(ctx)
}

func (s *ltSpyGroup) wrap(w comm.Work, err error, what string) (comm.Work, error) {
	if err != nil {
		return nil, err
	}
	return ltSpyWork{w, s, what}, nil
}

func (s *ltSpyGroup) AllReduceAsync(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	s.note("issue all-reduce")
	w, err := s.Group.AllReduceAsync(ctx, buf, op)
	return s.wrap(w, err, "all-reduce")
}

func (s *ltSpyGroup) ReduceScatterAsync(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	s.note("issue reduce-scatter")
	w, err := s.Group.ReduceScatterAsync(ctx, out, in, op)
	return s.wrap(w, err, "reduce-scatter")
}

func (s *ltSpyGroup) AllGatherAsync(ctx context.Context, out, in comm.Buffer) (comm.Work, error) {
	s.note("issue all-gather")
	w, err := s.Group.AllGatherAsync(ctx, out, in)
	return s.wrap(w, err, "all-gather")
}

// The input-gradient collective is issued before the weight-gradient GEMM
// and waited for after it (the overlap), and with SerialComm waited for
// before it. Under SP the input's all-gather is issued before, and waited
// for after, the dX GEMM (the spy sees it issued and waited with no weight
// gradient yet, and before the reduce-scatter). Checked by the order of
// events, not by timing.
func TestLinearCoreOverlapOrder(t *testing.T) {
	cases := []struct {
		sp, serial bool
		want       []string
	}{
		{false, false, []string{"issue all-reduce wgrad=false", "wait all-reduce wgrad=true"}},
		{false, true, []string{"issue all-reduce wgrad=false", "wait all-reduce wgrad=false"}},
		{true, false, []string{"issue all-gather wgrad=false", "wait all-gather wgrad=false", "issue reduce-scatter wgrad=false", "wait reduce-scatter wgrad=true"}},
		{true, true, []string{"issue all-gather wgrad=false", "wait all-gather wgrad=false", "issue reduce-scatter wgrad=false", "wait reduce-scatter wgrad=false"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("sp=%v/serial=%v", c.sp, c.serial), func(t *testing.T) {
			logs := make([][]string, 2)
			runRanks(t, 2, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
				r := g.Rank()
				xs := ltS
				if c.sp {
					xs = ltS / 2
				}
				xv := autograd.NewLeaf(randn(uint64(1+r), 1, xs, ltB, ltIn), "x", true)
				wv := autograd.NewLeaf(randn(uint64(5+r), 1, ltOut/2, ltIn), "w", true)
				spy := &ltSpyGroup{Group: g, w: wv}
				y := LinearWithGradAccumulationAndAsyncAllreduce(tape, xv, wv, nil, LinearOptions{Group: spy, SequenceParallel: c.sp, AllreduceDgrad: !c.sp, SerialComm: c.serial})
				if err := autograd.Backward(tape, y, randn(9, 1, y.Value.Shape()...)); err != nil {
					return err
				}
				logs[r] = spy.log
				return nil
			})
			for r, l := range logs {
				if !reflect.DeepEqual(l, c.want) {
					t.Errorf("rank %d: events %q, want %q", r, l, c.want)
				}
			}
		})
	}
}
