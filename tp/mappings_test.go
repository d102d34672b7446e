package tp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
)

// Every mapping is pure data movement or a rank-order float32 sum, so
// each test below compares the parallel forward output and input gradient
// bitwise with a serial computation: slices, concatenations and left-fold
// sums over ranks 0, 1, …, n-1 (the order comm reduces in).

var mappingRanks = []int{1, 2, 4}

// mappingResult is one rank's forward output and input gradient.
type mappingResult struct {
	y, dx *tensor.Tensor
}

// runMapping runs op on n ranks. Rank r's input is in(r) and the gradient
// of its output is dy(r, shape of the output); it returns every rank's
// output and input gradient (copies).
func runMapping(t *testing.T, n int, in func(r int) *tensor.Tensor,
	op func(tape *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var,
	dy func(r int, shape []int) *tensor.Tensor) []mappingResult {
	t.Helper()
	res := make([]mappingResult, n)
	runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		r := g.Rank()
		x := autograd.NewLeaf(in(r), "x", true)
		y := op(tape, x, g)
		if err := tape.Err(); err != nil {
			return err
		}
		res[r].y = y.Value.Clone()
		if err := autograd.Backward(tape, y, dy(r, y.Value.Shape())); err != nil {
			return err
		}
		if x.Grad == nil {
			return fmt.Errorf("rank %d: no input gradient", r)
		}
		res[r].dx = x.Grad.Clone()
		return nil
	})
	return res
}

// rankGrad returns rank r's output gradient for a given output shape.
func rankGrad(r int, shape []int) *tensor.Tensor { return randn(uint64(9000+r), 1, shape...) }

// sameTensorBits fails unless got and want have one shape and equal bits.
func sameTensorBits(t *testing.T, what string, got, want *tensor.Tensor) {
	t.Helper()
	if !tensor.SameShape(got, want) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape(), want.Shape())
	}
	numtest.SameBits(t, what, got.Contiguous().Data(), want.Contiguous().Data())
}

// rankSum is Σ_k ts[k], summed left to right in float32.
func rankSum(ts []*tensor.Tensor) *tensor.Tensor {
	acc := ts[0].Clone()
	a := acc.Data()
	for _, x := range ts[1:] {
		for i, v := range x.Contiguous().Data() {
			a[i] += v
		}
	}
	return acc
}

// piece returns chunk r of n of x along dim, as a contiguous copy.
func chunkOf(x *tensor.Tensor, dim, n, r int) *tensor.Tensor {
	return x.Chunk(dim, n)[r].Clone()
}

// inputs returns in(0..n-1).
func rankInputs(n int, in func(r int) *tensor.Tensor) []*tensor.Tensor {
	ts := make([]*tensor.Tensor, n)
	for r := range ts {
		ts[r] = in(r)
	}
	return ts
}

// grads returns rankGrad(r, shape(r)) for r in 0..n-1.
func rankGrads(n int, shape func(r int) []int) []*tensor.Tensor {
	ts := make([]*tensor.Tensor, n)
	for r := range ts {
		ts[r] = rankGrad(r, shape(r))
	}
	return ts
}

func fixedShape(shape ...int) func(int) []int { return func(int) []int { return shape } }

func TestCopyToTensorModelParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		x := randn(1, 1, 3, 2, 4)
		res := runMapping(t, n, func(int) *tensor.Tensor { return x.Clone() }, CopyToTensorModelParallelRegion, rankGrad)
		dx := rankSum(rankGrads(n, fixedShape(3, 2, 4)))
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, x)
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, dx)
		}
	}
}

func TestReduceFromTensorModelParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		in := func(r int) *tensor.Tensor { return randn(uint64(10+r), 1, 3, 2, 4) }
		res := runMapping(t, n, in, ReduceFromTensorModelParallelRegion, rankGrad)
		y := rankSum(rankInputs(n, in))
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, y)
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, rankGrad(r, y.Shape()))
		}
	}
}

func TestScatterToTensorModelParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		x := randn(2, 1, 3, 2, 8)
		res := runMapping(t, n, func(int) *tensor.Tensor { return x.Clone() }, ScatterToTensorModelParallelRegion, rankGrad)
		dx := tensor.Cat(-1, rankGrads(n, fixedShape(3, 2, 8/n))...)
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, chunkOf(x, -1, n, r))
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, dx)
		}
	}
}

func TestGatherFromTensorModelParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		in := func(r int) *tensor.Tensor { return randn(uint64(20+r), 1, 3, 2, 2) }
		res := runMapping(t, n, in, GatherFromTensorModelParallelRegion, rankGrad)
		y := tensor.Cat(-1, rankInputs(n, in)...)
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, y)
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, chunkOf(rankGrad(r, y.Shape()), -1, n, r))
		}
	}
}

func TestScatterToSequenceParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		x := randn(3, 1, 8, 2, 3)
		res := runMapping(t, n, func(int) *tensor.Tensor { return x.Clone() }, ScatterToSequenceParallelRegion, rankGrad)
		dx := tensor.Cat(0, rankGrads(n, fixedShape(8/n, 2, 3))...)
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, chunkOf(x, 0, n, r))
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, dx)
		}
	}
}

// unevenRowSplits returns uneven row counts for n ranks (one of them zero
// when n = 4).
func unevenRowSplits(n int) []int {
	switch n {
	case 1:
		return []int{3}
	case 2:
		return []int{3, 1}
	}
	return []int{2, 0, 3, 1}
}

// splitOffset returns Σ_{k<r} sizes[k].
func splitOffset(sizes []int, r int) int {
	o := 0
	for _, s := range sizes[:r] {
		o += s
	}
	return o
}

func TestGatherFromSequenceParallelRegion(t *testing.T) {
	for _, uneven := range []bool{false, true} {
		for _, tpGrad := range []bool{true, false} {
			for _, n := range mappingRanks {
				name := fmt.Sprintf("n=%d uneven=%v tpGrad=%v", n, uneven, tpGrad)
				sizes := []int{2, 2, 2, 2}[:n]
				var split []int
				if uneven {
					sizes = unevenRowSplits(n)
					split = sizes
				}
				in := func(r int) *tensor.Tensor { return randn(uint64(30+r), 1, sizes[r], 2, 3) }
				op := func(tape *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
					return GatherFromSequenceParallelRegion(tape, x, g, tpGrad, split)
				}
				res := runMapping(t, n, in, op, rankGrad)
				y := tensor.Cat(0, rankInputs(n, in)...)
				dyAll := rankGrads(n, fixedShape(y.Shape()...))
				for r, o := range res {
					sameTensorBits(t, name+fmt.Sprintf(" rank %d y", r), o.y, y)
					src := dyAll[r]
					if tpGrad {
						src = rankSum(dyAll)
					}
					want := src.Narrow(0, splitOffset(sizes, r), sizes[r]).Clone()
					sameTensorBits(t, name+fmt.Sprintf(" rank %d dx", r), o.dx, want)
				}
			}
		}
	}
}

func TestReduceScatterToSequenceParallelRegion(t *testing.T) {
	for _, uneven := range []bool{false, true} {
		for _, n := range mappingRanks {
			name := fmt.Sprintf("n=%d uneven=%v", n, uneven)
			sizes := []int{2, 2, 2, 2}[:n]
			var split []int
			if uneven {
				sizes = unevenRowSplits(n)
				split = sizes
			}
			total := splitOffset(sizes, n)
			in := func(r int) *tensor.Tensor { return randn(uint64(40+r), 1, total, 2, 3) }
			op := func(tape *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
				return ReduceScatterToSequenceParallelRegion(tape, x, g, split)
			}
			res := runMapping(t, n, in, op, rankGrad)
			sum := rankSum(rankInputs(n, in))
			dx := tensor.Cat(0, rankGrads(n, func(r int) []int { return []int{sizes[r], 2, 3} })...)
			for r, o := range res {
				sameTensorBits(t, name+fmt.Sprintf(" rank %d y", r), o.y, sum.Narrow(0, splitOffset(sizes, r), sizes[r]).Clone())
				sameTensorBits(t, name+fmt.Sprintf(" rank %d dx", r), o.dx, dx)
			}
		}
	}
}

func TestAllGatherLastDimFromTensorParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		in := func(r int) *tensor.Tensor { return randn(uint64(50+r), 1, 3, 2, 2) }
		res := runMapping(t, n, in, AllGatherLastDimFromTensorParallelRegion, rankGrad)
		y := tensor.Cat(-1, rankInputs(n, in)...)
		dySum := rankSum(rankGrads(n, fixedShape(y.Shape()...)))
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, y)
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, chunkOf(dySum, -1, n, r))
		}
	}
}

func TestReduceScatterLastDimToTensorParallelRegion(t *testing.T) {
	for _, n := range mappingRanks {
		in := func(r int) *tensor.Tensor { return randn(uint64(60+r), 1, 3, 2, 8) }
		res := runMapping(t, n, in, ReduceScatterLastDimToTensorParallelRegion, rankGrad)
		sum := rankSum(rankInputs(n, in))
		dx := tensor.Cat(-1, rankGrads(n, fixedShape(3, 2, 8/n))...)
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, chunkOf(sum, -1, n, r))
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, dx)
		}
	}
}

// serialAllToAll is the reference exchange: rank j sends send[j][k] rows
// of xs[j], in order, to rank k; rank k's output is the pieces it receives
// in rank order.
func serialAllToAll(xs []*tensor.Tensor, send [][]int) []*tensor.Tensor {
	n := len(xs)
	out := make([]*tensor.Tensor, n)
	for k := range out {
		parts := make([]*tensor.Tensor, n)
		for j := range parts {
			parts[j] = xs[j].Narrow(0, splitOffset(send[j], k), send[j][k])
		}
		out[k] = tensor.Cat(0, parts...)
	}
	return out
}

// transposed returns m with rows and columns swapped.
func transposeSplits(m [][]int) [][]int {
	t := make([][]int, len(m))
	for i := range t {
		t[i] = make([]int, len(m))
		for j := range t[i] {
			t[i][j] = m[j][i]
		}
	}
	return t
}

func TestAllToAll(t *testing.T) {
	for _, uneven := range []bool{false, true} {
		for _, n := range mappingRanks {
			name := fmt.Sprintf("n=%d uneven=%v", n, uneven)
			send := make([][]int, n) // send[j][k]: rows rank j sends to rank k
			for j := range send {
				send[j] = make([]int, n)
				for k := range send[j] {
					send[j][k] = 2
					if uneven {
						send[j][k] = (j + 2*k + 1) % 4 // zeros included for n = 4
					}
				}
			}
			recv := transposeSplits(send)
			in := func(r int) *tensor.Tensor { return randn(uint64(70+r), 1, splitOffset(send[r], n), 3, 2) }
			op := func(tape *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
				if !uneven {
					return AllToAll(tape, g, x, nil, nil)
				}
				return AllToAll(tape, g, x, recv[g.Rank()], send[g.Rank()])
			}
			res := runMapping(t, n, in, op, rankGrad)
			ys := serialAllToAll(rankInputs(n, in), send)
			dys := rankGrads(n, func(r int) []int { return ys[r].Shape() })
			dxs := serialAllToAll(dys, recv)
			for r, o := range res {
				sameTensorBits(t, name+fmt.Sprintf(" rank %d y", r), o.y, ys[r])
				sameTensorBits(t, name+fmt.Sprintf(" rank %d dx", r), o.dx, dxs[r])
			}
		}
	}
}

func TestAllToAllSP2HP(t *testing.T) {
	for _, shape := range [][]int{{3, 8}, {2, 2, 8}} { // [N/tp, H] and [s/tp, b, H]
		for _, n := range mappingRanks {
			name := fmt.Sprintf("n=%d local shape %v", n, shape)
			in := func(r int) *tensor.Tensor { return randn(uint64(80+r), 1, shape...) }
			res := runMapping(t, n, in, AllToAllSP2HP, rankGrad)
			h := shape[len(shape)-1]
			x := tensor.Cat(0, rankInputs(n, in)...).View(-1, h) // [N, H]
			dy := tensor.Cat(-1, rankGrads(n, fixedShape(x.Dim(0), h/n))...)
			for r, o := range res {
				sameTensorBits(t, name+fmt.Sprintf(" rank %d y", r), o.y, chunkOf(x, -1, n, r))
				sameTensorBits(t, name+fmt.Sprintf(" rank %d dx", r), o.dx, chunkOf(dy, 0, n, r).View(shape...))
			}
		}
	}
}

func TestAllToAllHP2SP(t *testing.T) {
	for _, shape := range [][]int{{4, 3}, {4, 2, 3}} { // [N, H/tp] and [s, b, H/tp]
		for _, n := range mappingRanks {
			name := fmt.Sprintf("n=%d local shape %v", n, shape)
			in := func(r int) *tensor.Tensor { return randn(uint64(90+r), 1, shape...) }
			res := runMapping(t, n, in, AllToAllHP2SP, rankGrad)
			hc := shape[len(shape)-1]
			xs := rankInputs(n, in)
			for r := range xs {
				xs[r] = xs[r].View(-1, hc)
			}
			x := tensor.Cat(-1, xs...) // [N, H]
			dy := tensor.Cat(0, rankGrads(n, fixedShape(x.Dim(0)/n, x.Dim(1)))...)
			for r, o := range res {
				sameTensorBits(t, name+fmt.Sprintf(" rank %d y", r), o.y, chunkOf(x, 0, n, r))
				sameTensorBits(t, name+fmt.Sprintf(" rank %d dx", r), o.dx, chunkOf(dy, -1, n, r).View(shape...))
			}
		}
	}
}

// TestAllToAllRoundTrip checks HP2SP(SP2HP(x)) = x and that the gradient
// of the round trip is the output gradient itself.
func TestAllToAllRoundTrip(t *testing.T) {
	for _, n := range mappingRanks {
		in := func(r int) *tensor.Tensor { return randn(uint64(100+r), 1, 3, 8) }
		op := func(tape *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return AllToAllHP2SP(tape, AllToAllSP2HP(tape, x, g), g)
		}
		res := runMapping(t, n, in, op, rankGrad)
		for r, o := range res {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d y", n, r), o.y, in(r))
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d dx", n, r), o.dx, rankGrad(r, []int{3, 8}))
		}
	}
}

// TestMappingErrors checks that bad shapes and split sizes fail on every
// rank, before any communication, with an error naming the sizes.
func TestMappingErrors(t *testing.T) {
	type op = func(tape *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var
	cases := []struct {
		name  string
		n     int
		shape []int
		op    op
		want  string
	}{
		{"scatter to SP, dim 0 not divisible", 2, []int{5, 2}, ScatterToSequenceParallelRegion,
			"first dimension of the tensor (5) should be divisible by tensor parallel size 2"},
		{"reduce-scatter to SP, dim 0 not divisible", 4, []int{6, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return ReduceScatterToSequenceParallelRegion(t, x, g, nil)
		}, "(6) should be divisible by tensor parallel size 4"},
		{"reduce-scatter to SP, splits do not sum to dim 0", 2, []int{5, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return ReduceScatterToSequenceParallelRegion(t, x, g, []int{2, 2})
		}, "dim 0 is 5 but the split sizes [2 2] sum to 4"},
		{"gather from SP, wrong number of splits", 2, []int{1, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return GatherFromSequenceParallelRegion(t, x, g, true, []int{1, 1, 1})
		}, "3 split sizes for a group of 2 ranks"},
		{"gather from SP, dim 0 is not this rank's split", 2, []int{2, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return GatherFromSequenceParallelRegion(t, x, g, true, []int{4, 4})
		}, "dim 0 is 2 but this rank's split size is 4"},
		{"scatter to TP, last dim not divisible", 2, []int{2, 5}, ScatterToTensorModelParallelRegion,
			"last dimension of the tensor (5) should be divisible by tensor parallel size 2"},
		{"reduce-scatter last dim, not divisible", 4, []int{2, 6}, ReduceScatterLastDimToTensorParallelRegion,
			"last dimension of the tensor (6) should be divisible by tensor parallel size 4"},
		{"all-to-all, dim 0 not divisible", 2, []int{5, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return AllToAll(t, g, x, nil, nil)
		}, "first dimension of the tensor (5) should be divisible by the group size 2"},
		{"all-to-all, wrong number of splits", 2, []int{5, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return AllToAll(t, g, x, []int{5}, []int{5})
		}, "has 1 entries [5] for a group of 2 ranks"},
		{"all-to-all, input splits do not sum to dim 0", 2, []int{5, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return AllToAll(t, g, x, []int{1, 1}, []int{1, 1})
		}, "input split sizes [1 1] sum to 2 but dim 0 of the tensor [5 2] is 5"},
		{"all-to-all, negative split", 2, []int{5, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return AllToAll(t, g, x, []int{1, 1}, []int{6, -1})
		}, "input split sizes[1] = -1 is negative"},
		{"all-to-all on one rank, wrong split", 1, []int{5, 2}, func(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
			return AllToAll(t, g, x, []int{5}, []int{3})
		}, "input split sizes [3] sum to 3 but dim 0 of the tensor [5 2] is 5"},
		{"sp2hp, hidden not divisible", 2, []int{4, 5}, AllToAllSP2HP,
			"last dimension of the tensor (5) should be divisible by tensor parallel size 2"},
		{"hp2sp, tokens not divisible", 2, []int{5, 4}, AllToAllHP2SP,
			"first dimension of the tensor (5) should be divisible by the group size 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runRanks(t, c.n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
				x := autograd.NewLeaf(randn(1, 1, c.shape...), "x", true)
				y := c.op(tape, x, g)
				err := tape.Err()
				if err == nil {
					return fmt.Errorf("rank %d: no error; output %v", g.Rank(), y.Value.Shape())
				}
				if !strings.Contains(err.Error(), c.want) {
					return fmt.Errorf("rank %d: error %q does not contain %q", g.Rank(), err, c.want)
				}
				return nil
			})
		})
	}
}

// ExampleCopyToTensorModelParallelRegion shows a mapping on two in-process
// ranks: the forward is the identity, and the backward all-reduces the
// ranks' gradients (1 from rank 0, 2 from rank 1).
func ExampleCopyToTensorModelParallelRegion() {
	grads := make([][]float32, 2)
	err := local.NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		tape := autograd.NewTape(ctx)
		x := autograd.NewLeaf(tensor.FromSlice([]float32{1, 2, 3}, 3), "x", true)
		y := CopyToTensorModelParallelRegion(tape, x, g) // y.Value is x's value
		dy := tensor.Full(float32(g.Rank()+1), 3)
		if err := autograd.Backward(tape, y, dy); err != nil {
			return err
		}
		grads[g.Rank()] = x.Grad.Data()
		return nil
	})
	fmt.Println(grads, err)
	// Output: [[3 3 3] [3 3 3]] <nil>
}
