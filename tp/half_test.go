package tp

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// Mixed-precision tensor-parallel layers: each rank runs its layer with
// bfloat16 or float16 parameter values and compares with the float32 layer
// whose parameters hold the same rounded values, run on the explicitly
// rounded GEMM inputs (x and dy rounded; the bias gradient from the
// unrounded dy). The collectives are the same in both runs, so the ranks'
// results compare one to one: bitwise for float16 (its GEMMs are float32
// GEMMs of the widened operands) and for everything that is not a GEMM;
// within hpTol for bfloat16 GEMMs (oneDNN, whose float32 sums run in
// another order than the BLAS's; the products are exact).

var hpTypes = []tensor.DType{tensor.BFloat16, tensor.Float16}

// hpTol bounds the relative (norm) difference of a bfloat16 GEMM result.
const hpTol = 1e-6

// hpSpy records the dtype of every all-gather's input buffer.
type hpSpy struct {
	comm.Group
	gathers []comm.DType
}

func (s *hpSpy) AllGather(ctx context.Context, out, in comm.Buffer) error {
	s.gathers = append(s.gathers, in.DType())
	return s.Group.AllGather(ctx, out, in)
}

func (s *hpSpy) AllGatherAsync(ctx context.Context, out, in comm.Buffer) (comm.Work, error) {
	s.gathers = append(s.gathers, in.DType())
	return s.Group.AllGatherAsync(ctx, out, in)
}

// hpResult is one run of a layer on one rank: the last pass's output and
// input gradient, the weight and bias gradients, the activation bytes after
// the first forward, and the dtypes the all-gathers carried.
type hpResult struct {
	y, dx, dw, db *tensor.Tensor
	act           int64
	gathers       []comm.DType
}

// hpLayer is a linear layer under test, built fresh for every run.
type hpLayer struct {
	w, b *nn.Parameter
	fwd  func(t *autograd.Tape, x *autograd.Var) (*autograd.Var, error)
}

// hpBuild builds a column- ("col") or row-parallel ("row") linear of ltIn →
// ltOut with a bias on group g, sequence parallel when sp.
func hpBuild(kind string, g comm.Group, sp bool) (hpLayer, error) {
	if kind == "col" {
		l, err := NewColumnParallelLinear("fc1", ltIn, ltOut, ColumnParallelConfig{Group: g, SkipInitialization: true, Bias: true, SequenceParallel: sp})
		if err != nil {
			return hpLayer{}, err
		}
		return hpLayer{l.Weight, l.Bias, func(t *autograd.Tape, x *autograd.Var) (*autograd.Var, error) {
			y, _, err := l.Forward(t, x, nil, nil)
			return y, err
		}}, nil
	}
	l, err := NewRowParallelLinear("fc2", ltIn, ltOut, RowParallelConfig{Group: g, SkipInitialization: true, Bias: true, InputIsParallel: true, SequenceParallel: sp})
	if err != nil {
		return hpLayer{}, err
	}
	return hpLayer{l.Weight, l.Bias, func(t *autograd.Tape, x *autograd.Var) (*autograd.Var, error) {
		y, _, err := l.Forward(t, x)
		return y, err
	}}, nil
}

// hpRun builds the layer on a spy of g with parameter values w and b
// (Grads preset to gw and gb when not nil; the weight frozen when frozen)
// and runs one forward and backward per output gradient in dys.
func hpRun(tape *autograd.Tape, g comm.Group, kind string, sp, frozen bool, w, b, gw, gb, x *tensor.Tensor, dys ...*tensor.Tensor) (hpResult, error) {
	spy := &hpSpy{Group: g}
	l, err := hpBuild(kind, spy, sp)
	if err != nil {
		return hpResult{}, err
	}
	l.w.Value, l.b.Value = w, b
	l.w.Grad, l.b.Grad = gw, gb
	if frozen {
		l.w.SetRequiresGrad(false)
	}
	xv := autograd.NewLeaf(x.Clone(), "x", true)
	var r hpResult
	for k, dy := range dys {
		y, err := l.fwd(tape, xv)
		if err != nil {
			return hpResult{}, err
		}
		if k == 0 {
			r.act = tape.ActivationBytes()
		}
		if err := autograd.Backward(tape, y, dy); err != nil {
			return hpResult{}, err
		}
		r.y = y.Value
	}
	r.dx, r.dw, r.db, r.gathers = xv.Grad, l.w.Grad, l.b.Grad, spy.gathers
	return r, nil
}

// hpClose compares bitwise when bitwise is set, else within hpTol.
func hpClose(t *testing.T, what string, got, want *tensor.Tensor, bitwise bool) {
	t.Helper()
	if bitwise {
		numtest.SameTensor(t, what, got, want)
		return
	}
	numtest.CloseNorm(t, what, got.Contiguous().Data(), want.Contiguous().Data(), hpTol)
}

// hpRanks is what every rank of TestParallelLinearHalf hands back.
type hpRanks struct {
	got, ref, refB, frozen, got2, acc hpResult
	xLen                              int
}

// ColumnParallelLinear and RowParallelLinear with 16-bit weight and bias on
// 1 and 2 ranks, with and without sequence parallelism, against the float32
// layers on the rounded values. Also: the input is saved in 16 bits, under
// sequence parallelism the input's all-gathers (forward and backward's
// re-gather) carry 16-bit elements, the frozen-weight path gives the same
// output and input gradient, and 16-bit Grads hold round(round(g1) + g2)
// after two passes.
func TestParallelLinearHalf(t *testing.T) {
	for _, kind := range []string{"col", "row"} {
		for _, n := range []int{1, 2} {
			for _, sp := range []bool{false, true} {
				for _, d := range hpTypes {
					t.Run(fmt.Sprintf("%s/tp=%d/sp=%v/%v", kind, n, sp, d), func(t *testing.T) { hpCheckLinear(t, kind, n, sp, d) })
				}
			}
		}
	}
}

func hpCheckLinear(t *testing.T, kind string, n int, sp bool, d tensor.DType) {
	res := make([]hpRanks, n)
	runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		r := g.Rank()
		s, in, out, ys := ltS, ltIn, ltOut/n, ltS // x [s, b, in], dy [ys, b, out]
		if kind == "row" {
			in, out = ltIn/n, ltOut
			if sp && n > 1 {
				ys = ltS / n
			}
		} else if sp && n > 1 {
			s = ltS / n
		}
		x := randn(uint64(10+r), 1, s, ltB, in)
		w, b := randn(uint64(20+r), 0.3, out, in), randn(uint64(30), 1, out)
		dy, dy2 := randn(uint64(40+r), 1, ys, ltB, out), randn(uint64(50+r), 1, ys, ltB, out)
		wh, bh := tensor.ToHalf(w, d), tensor.ToHalf(b, d)
		wr, br, xr := numtest.Rounded(w, d), numtest.Rounded(b, d), numtest.Rounded(x, d)
		o := &res[r]
		o.xLen = x.Len()
		var err error
		run := func(dst *hpResult, frozen bool, w, b, gw, gb, x *tensor.Tensor, dys ...*tensor.Tensor) {
			if err == nil {
				*dst, err = hpRun(tape, g, kind, sp, frozen, w, b, gw, gb, x, dys...)
			}
		}
		run(&o.got, false, wh, bh, nil, nil, x, dy)
		run(&o.ref, false, wr, br, nil, nil, xr, numtest.Rounded(dy, d))
		run(&o.refB, false, wr, br, nil, nil, xr, dy)
		run(&o.frozen, true, wh, bh, nil, nil, x, dy)
		run(&o.got2, false, wh, bh, nil, nil, x, dy2)
		run(&o.acc, false, wh, bh, tensor.NewOf(d, w.Shape()...), tensor.NewOf(d, b.Shape()...), x, dy, dy2)
		return err
	})
	bitwise := d == tensor.Float16
	wantGather := comm.BFloat16
	if d == tensor.Float16 {
		wantGather = comm.Float16
	}
	for r, o := range res {
		at := func(what string) string { return fmt.Sprintf("rank %d: %s", r, what) }
		hpClose(t, at("output"), o.got.y, o.ref.y, bitwise)
		hpClose(t, at("input grad"), o.got.dx, o.ref.dx, bitwise)
		hpClose(t, at("weight grad"), o.got.dw, o.ref.dw, bitwise)
		numtest.SameTensor(t, at("bias grad"), o.got.db, o.refB.db)
		numtest.SameTensor(t, at("frozen weight: output"), o.frozen.y, o.got.y)
		numtest.SameTensor(t, at("frozen weight: input grad"), o.frozen.dx, o.got.dx)
		if o.frozen.dw != nil {
			t.Errorf("rank %d: the frozen weight got a gradient", r)
		}
		numtest.SameTensor(t, at("16-bit weight grad after two passes"), o.acc.dw, numtest.Accumulated(o.got.dw, o.got2.dw, d))
		numtest.SameTensor(t, at("16-bit bias grad after two passes"), o.acc.db, numtest.Accumulated(o.got.db, o.got2.db, d))
		if want := int64(2 * o.xLen); o.got.act != want || o.ref.act != 2*want {
			t.Errorf("rank %d: activation bytes %d with a %v weight, %d with float32; want %d and %d", r, o.got.act, d, o.ref.act, want, 2*want)
		}
		if kind == "col" && sp && n > 1 {
			// Forward's gather, backward's re-gather (twice per pass with
			// a 16-bit Grad too); the frozen layer gathers in forward only.
			for _, run := range []hpResult{o.got, o.frozen, o.acc} {
				if len(run.gathers) == 0 {
					t.Errorf("rank %d: no all-gather under sequence parallelism", r)
				}
				for _, g := range run.gathers {
					if g != wantGather {
						t.Errorf("rank %d: all-gathers carried %v, want all %v", r, run.gathers, wantGather)
						break
					}
				}
			}
			if len(o.got.gathers) != 2 || len(o.frozen.gathers) != 1 || len(o.ref.gathers) != 2 || o.ref.gathers[0] != comm.Float32 {
				t.Errorf("rank %d: all-gathers %v (16-bit), %v (frozen), %v (float32); want 2, 1 and 2 float32", r, o.got.gathers, o.frozen.gathers, o.ref.gathers)
			}
		}
	}
}

// VocabParallelEmbedding with a 16-bit table on 1 and 2 ranks, all-reduced
// or reduce-scattered: output and table gradient bitwise those of the
// float32 table of the rounded values, a 16-bit Grad holds
// round(round(g1) + g2) after two passes, and GatherPartitioned reassembles
// the 16-bit table in 16 bits.
func TestVocabParallelEmbeddingHalf(t *testing.T) {
	const v, h, s, b = 16, 8, 4, 3
	ids := embIDs(9, s*b, v)
	for _, n := range []int{1, 2} {
		for _, rs := range []bool{false, true} {
			for _, d := range hpTypes {
				t.Run(fmt.Sprintf("tp=%d/rs=%v/%v", n, rs, d), func(t *testing.T) {
					type out struct{ y, g, yRef, gRef1, gRef2, acc, full, fullRef *tensor.Tensor }
					res := make([]out, n)
					runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
						r := g.Rank()
						ys := s
						if rs && n > 1 {
							ys = s / n
						}
						dy, dy2 := randn(uint64(60+r), 1, ys, b, h), randn(uint64(70+r), 1, ys, b, h)
						run := func(half bool, grad *tensor.Tensor, dys ...*tensor.Tensor) (*tensor.Tensor, *nn.Parameter, error) {
							e, err := NewVocabParallelEmbedding("emb", v, h, g, embInit(4), WithReduceScatterEmbeddings(rs))
							if err != nil {
								return nil, nil, err
							}
							if half {
								e.Weight.Value = tensor.ToHalf(e.Weight.Value, d)
							} else {
								e.Weight.Value = numtest.Rounded(e.Weight.Value, d)
							}
							e.Weight.Grad = grad
							var y *autograd.Var
							for _, dy := range dys {
								if y, err = e.Forward(tape, ids, s, b); err != nil {
									return nil, nil, err
								}
								if err := autograd.Backward(tape, y, dy); err != nil {
									return nil, nil, err
								}
							}
							return y.Value, e.Weight, nil
						}
						o := &res[r]
						y, p, err := run(true, nil, dy)
						if err != nil {
							return err
						}
						o.y, o.g = y, p.Grad
						if o.full, err = GatherPartitioned(ctx, g, p, p.Value); err != nil {
							return err
						}
						y, p, err = run(false, nil, dy)
						if err != nil {
							return err
						}
						o.yRef, o.gRef1 = y, p.Grad
						if o.fullRef, err = GatherPartitioned(ctx, g, p, p.Value); err != nil {
							return err
						}
						_, p, err = run(false, nil, dy2)
						if err != nil {
							return err
						}
						o.gRef2 = p.Grad
						_, p, err = run(true, tensor.NewOf(d, p.Value.Shape()...), dy, dy2)
						if err != nil {
							return err
						}
						o.acc = p.Grad
						return nil
					})
					for r, o := range res {
						numtest.SameTensor(t, fmt.Sprintf("rank %d: output", r), o.y, o.yRef)
						numtest.SameTensor(t, fmt.Sprintf("rank %d: float32 table grad", r), o.g, o.gRef1)
						numtest.SameTensor(t, fmt.Sprintf("rank %d: 16-bit table grad after two passes", r), o.acc, numtest.Accumulated(o.gRef1, o.gRef2, d))
						numtest.SameTensor(t, fmt.Sprintf("rank %d: gathered 16-bit table", r), o.full, tensor.ToHalf(o.fullRef, d))
					}
				})
			}
		}
	}
}
