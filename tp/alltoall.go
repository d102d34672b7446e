package tp

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// AllToAll exchanges pieces of x's dim 0 between the ranks of g
// (torch.distributed.all_to_all_single; docs/SEMANTICS.md § Tensor-parallel
// mappings). Split sizes count rows of dim 0 (each row is the product of the
// other dimensions), one entry per rank:
//
//   - inputSplitSizes[k] rows of x, in order, go to rank k;
//   - outputSplitSizes[k] rows of the output, in order, come from rank k.
//
// So x is [Σ inputSplitSizes, ...] and the output [Σ outputSplitSizes, ...];
// rank j's inputSplitSizes[k] must equal rank k's outputSplitSizes[j]. A
// nil side means equal splits: inputSplitSizes nil cuts x's n rows into tp
// pieces of n/tp, and outputSplitSizes nil gives an output of x's shape cut
// into tp pieces of n/tp, which both need n divisible by tp. With both nil
// this is the equal exchange g.AllToAll, else g.AllToAllV.
//
// Backward is the same exchange with the split sizes swapped: the gradient
// of the output [Σ outputSplitSizes, ...] sends outputSplitSizes[k] rows to
// rank k and receives inputSplitSizes[k] rows from it, giving x's gradient
// [Σ inputSplitSizes, ...].
//
// Bad split sizes (the wrong count, a negative entry, a sum that is not
// x's dim 0) and an n not divisible by tp where equal splits are asked for
// are recorded on the tape as errors naming the sizes. On a group of one
// rank, or a nil group, AllToAll is the identity (given split sizes must
// then be [n]).
func AllToAll(t *autograd.Tape, g comm.Group, x *autograd.Var, outputSplitSizes, inputSplitSizes []int) *autograd.Var {
	if worldSize(g) == 1 {
		if x.Value != nil {
			if _, _, err := resolveSplits(g, x.Value, outputSplitSizes, inputSplitSizes, "all_to_all"); err != nil {
				t.Fail(err)
				return &autograd.Var{}
			}
		}
		return x
	}
	return autograd.Apply(t, allToAllFn{g: g, out: outputSplitSizes, in: inputSplitSizes}, x)
}

// allToAllFn is AllToAll's Function; out and in are the split sizes as
// given (nil means equal).
type allToAllFn struct {
	g       comm.Group
	out, in []int
}

// allToAllState is what the forward resolved: the row splits of both
// sides, and whether both are the equal default.
type allToAllState struct {
	out, in []int
	equal   bool
}

func (f allToAllFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	const what = "all_to_all"
	outS, inS, err := resolveSplits(f.g, in[0], f.out, f.in, what)
	if err != nil {
		return nil, err
	}
	equal := f.out == nil && f.in == nil
	c.State = allToAllState{out: outS, in: inS, equal: equal}
	return exchangeRows(c, f.g, in[0], outS, inS, equal, what)
}

func (f allToAllFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	s := c.State.(allToAllState)
	dx, err := exchangeRows(c, f.g, dy, s.in, s.out, s.equal, "all_to_all backward")
	return []*tensor.Tensor{dx}, err
}

// resolveSplits checks the split sizes of AllToAll for x and returns both
// sides with nil replaced by the equal split of x's dim 0.
func resolveSplits(g comm.Group, x *tensor.Tensor, out, in []int, what string) (outS, inS []int, err error) {
	ws := worldSize(g)
	if x.Rank() == 0 {
		return nil, nil, fmt.Errorf("tp: %s: the tensor is a scalar; it needs a dim 0 to split", what)
	}
	n := x.Dim(0)
	equal := func() ([]int, error) {
		if n%ws != 0 {
			return nil, fmt.Errorf("tp: %s: first dimension of the tensor (%d) should be divisible by the group size %d; pass split sizes for an uneven exchange", what, n, ws)
		}
		s := make([]int, ws)
		for i := range s {
			s[i] = n / ws
		}
		return s, nil
	}
	check := func(name string, s []int) error {
		if len(s) != ws {
			return fmt.Errorf("tp: %s: %s has %d entries %v for a group of %d ranks; pass one row count per rank", what, name, len(s), s, ws)
		}
		for k, v := range s {
			if v < 0 {
				return fmt.Errorf("tp: %s: %s[%d] = %d is negative", what, name, k, v)
			}
		}
		return nil
	}
	if in == nil {
		if inS, err = equal(); err != nil {
			return nil, nil, err
		}
	} else {
		if err := check("input split sizes", in); err != nil {
			return nil, nil, err
		}
		total := 0
		for _, v := range in {
			total += v
		}
		if total != n {
			return nil, nil, fmt.Errorf("tp: %s: input split sizes %v sum to %d but dim 0 of the tensor %v is %d; they must cut dim 0 exactly", what, in, total, x.Shape(), n)
		}
		inS = append([]int(nil), in...)
	}
	if out == nil {
		if outS, err = equal(); err != nil {
			return nil, nil, err
		}
	} else {
		if err := check("output split sizes", out); err != nil {
			return nil, nil, err
		}
		outS = append([]int(nil), out...)
	}
	if r := rankOf(g); outS[r] != inS[r] {
		return nil, nil, fmt.Errorf("tp: %s: rank %d keeps %d rows of its own input (input split sizes %v) but expects %d (output split sizes %v); the two must agree",
			what, r, inS[r], inS, outS[r], outS)
	}
	return outS, inS, nil
}

// exchangeRows runs the all-to-all of x [Σ inS, ...] into a new tensor
// [Σ outS, ...].
func exchangeRows(c *autograd.Ctx, g comm.Group, x *tensor.Tensor, outS, inS []int, equal bool, what string) (*tensor.Tensor, error) {
	x = x.Contiguous()
	row := 1
	for _, d := range x.Shape()[1:] {
		row *= d
	}
	shape := append([]int(nil), x.Shape()...)
	shape[0] = 0
	for _, v := range outS {
		shape[0] += v
	}
	y := tensor.New(shape...)
	if equal {
		if err := g.AllToAll(c.Context(), comm.F32(y.Data()), comm.F32(x.Data())); err != nil {
			return nil, fmt.Errorf("tp: %s: all-to-all along dim 0 over %s: %w", what, groupName(g), err)
		}
		return y, nil
	}
	send, recv := make([]int, len(inS)), make([]int, len(outS))
	for k := range inS {
		send[k], recv[k] = inS[k]*row, outS[k]*row
	}
	if err := g.AllToAllV(c.Context(), comm.F32(y.Data()), comm.F32(x.Data()), send, recv); err != nil {
		return nil, fmt.Errorf("tp: %s: uneven all-to-all along dim 0 (input splits %v, output splits %v rows) over %s: %w", what, inS, outS, groupName(g), err)
	}
	return y, nil
}

// AllToAllSP2HP turns a sequence-parallel activation into a
// hidden-parallel one over g: x [N/tp, H] (or [..., H], whose leading
// dimensions are flattened first) becomes [N, H/tp], where row block k
// (rows [k·N/tp, (k+1)·N/tp)) holds rank k's tokens and every rank keeps
// the hidden columns [r·H/tp, (r+1)·H/tp):
//
//	y_r[k·N/tp + i, c] = x_k[i, r·H/tp + c]
//
// It lays x's column chunks out as row blocks, [N/tp, H] → [tp·N/tp, H/tp]
// with block k = columns k, then calls AllToAll with equal splits; its
// gradient flows back through both (docs/SEMANTICS.md § Tensor-parallel
// mappings). H must be divisible by tp. On a group of one rank (or nil) a 2-D
// x is returned as is and any other is flattened to [N, H].
func AllToAllSP2HP(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	ws := worldSize(g)
	if ws == 1 && x.Value != nil && x.Value.Rank() == 2 {
		return x
	}
	y := autograd.Apply(t, colsToRows{ws: ws, what: "all_to_all_sp2hp"}, x)
	if ws == 1 {
		return y
	}
	return AllToAll(t, g, y, nil, nil)
}

// AllToAllHP2SP is the inverse of AllToAllSP2HP: x [N, H/tp] (or
// [..., H/tp], flattened first) becomes [N/tp, H], rank r keeping the
// tokens [r·N/tp, (r+1)·N/tp) with every rank's hidden columns side by
// side:
//
//	y_r[i, k·H/tp + c] = x_k[r·N/tp + i, c]
//
// It calls AllToAll with equal splits on the flattened x, then lays the
// received row blocks out as column chunks, [tp·N/tp, H/tp] → [N/tp, H];
// its gradient flows back through both (docs/SEMANTICS.md § Tensor-parallel
// mappings). N must be divisible by tp. On a group of one rank (or nil) a 2-D
// x is returned as is and any other is flattened to [N, H].
func AllToAllHP2SP(t *autograd.Tape, x *autograd.Var, g comm.Group) *autograd.Var {
	ws := worldSize(g)
	if x.Value == nil || x.Value.Rank() != 2 {
		x = autograd.Apply(t, colsToRows{ws: 1, what: "all_to_all_hp2sp"}, x)
	}
	if ws == 1 {
		return x
	}
	y := AllToAll(t, g, x, nil, nil)
	return autograd.Apply(t, rowsToCols{ws: ws, what: "all_to_all_hp2sp"}, y)
}

// colsToRows lays [..., H] (R rows once the leading dimensions are
// flattened) out as [ws·R, H/ws], row block k holding columns
// [k·H/ws, (k+1)·H/ws); with ws = 1 it only flattens to [R, H]. Backward
// is the inverse layout, reshaped to the input's shape.
type colsToRows struct {
	ws   int
	what string
}

func (f colsToRows) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0]
	if x.Rank() == 0 {
		return nil, fmt.Errorf("tp: %s: the tensor is a scalar; it needs a hidden dimension", f.what)
	}
	h := x.Dim(-1)
	if h%f.ws != 0 {
		return nil, fmt.Errorf("tp: %s: last dimension of the tensor (%d) should be divisible by tensor parallel size %d", f.what, h, f.ws)
	}
	rows := 1
	for _, d := range x.Shape()[:x.Rank()-1] {
		rows *= d
	}
	c.State = append([]int(nil), x.Shape()...)
	hc := h / f.ws
	return x.Contiguous().View(rows, f.ws, hc).Permute(1, 0, 2).Contiguous().View(f.ws*rows, hc), nil
}

func (f colsToRows) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	shape := c.State.([]int)
	hc := dy.Dim(1)
	rows := dy.Dim(0) / f.ws
	dx := dy.Contiguous().View(f.ws, rows, hc).Permute(1, 0, 2).Contiguous().View(shape...)
	return []*tensor.Tensor{dx}, nil
}

// rowsToCols lays [N, C] out as [N/ws, ws·C], row block k (rows
// [k·N/ws, (k+1)·N/ws)) becoming columns [k·C, (k+1)·C). Backward is the
// inverse layout.
type rowsToCols struct {
	ws   int
	what string
}

func (f rowsToCols) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0]
	if x.Rank() != 2 {
		return nil, fmt.Errorf("tp: %s: want a 2-D tensor, got %v", f.what, x.Shape())
	}
	n, cols := x.Dim(0), x.Dim(1)
	if n%f.ws != 0 {
		return nil, fmt.Errorf("tp: %s: first dimension of the tensor (%d) should be divisible by tensor parallel size %d", f.what, n, f.ws)
	}
	return x.Contiguous().View(f.ws, n/f.ws, cols).Permute(1, 0, 2).Contiguous().View(n/f.ws, f.ws*cols), nil
}

func (f rowsToCols) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	rows, cols := dy.Dim(0), dy.Dim(1)/f.ws
	dx := dy.Contiguous().View(rows, f.ws, cols).Permute(1, 0, 2).Contiguous().View(f.ws*rows, cols)
	return []*tensor.Tensor{dx}, nil
}
