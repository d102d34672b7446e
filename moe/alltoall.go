package moe

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tp"
)

// EPExchange is the plan of one all-to-all dispatch over an
// expert-parallel group of ep ranks (Megatron's MoEAlltoAllTokenDispatcher
// at expert tensor parallel 1): rank r holds the E/ep local experts
// [r·E/ep, (r+1)·E/ep), every rank routes its own tokens, and the routed
// rows travel to the ranks of their experts and back.
type EPExchange struct {
	g comm.Group
	// Send[k] are the rows this rank sends to rank k (its tokens routed to
	// k's experts); Recv[k] the rows it receives from rank k.
	Send, Recv []int
	// From[k][j] are the rows rank k routes to this rank's local expert j.
	From [][]int
	// Local[j] are local expert j's rows from all ranks (Σ_k From[k][j]).
	Local []int
}

// NewEPExchange exchanges every rank's per-expert row counts (counts [E],
// in global expert order, as NewDispatch lists them) over g and returns
// the plan. Every rank of g must call it.
func NewEPExchange(ctx context.Context, g comm.Group, counts []int) (*EPExchange, error) {
	ep, r := g.Size(), g.Rank()
	e := len(counts)
	if e%ep != 0 {
		return nil, fmt.Errorf("moe: %d experts over %d expert-parallel ranks: the experts must divide evenly", e, ep)
	}
	local := e / ep
	mine := make([]int64, e)
	for j, n := range counts {
		mine[j] = int64(n)
	}
	all := make([]int64, ep*e)
	if err := g.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return nil, fmt.Errorf("moe: exchanging the tokens per expert over %s: %w", g.Name(), err)
	}
	x := &EPExchange{g: g, Send: make([]int, ep), Recv: make([]int, ep), From: make([][]int, ep), Local: make([]int, local)}
	for k := 0; k < ep; k++ {
		x.From[k] = make([]int, local)
		for j := 0; j < local; j++ {
			x.Send[k] += counts[k*local+j]
			n := int(all[k*e+r*local+j])
			x.From[k][j] = n
			x.Recv[k] += n
			x.Local[j] += n
		}
	}
	return x, nil
}

// Dispatch sends a rank's permuted rows xp [N, h] (expert order) to the
// ranks of their experts and returns this rank's local experts' rows
// [Σ Local, h], expert by expert, each expert's rows by source rank
// (Megatron's all-to-all, then sort_chunks_by_idxs).
func (x *EPExchange) Dispatch(t *autograd.Tape, xp *autograd.Var) *autograd.Var {
	recv := tp.AllToAll(t, x.g, xp, x.Recv, x.Send) // source-major
	return autograd.Apply(t, sortChunksFn{sizes: x.srcMajor(), order: x.toExpertMajor()}, recv)
}

// Combine returns the local experts' outputs y [Σ Local, h] to the ranks
// that routed them, in each rank's own dispatch order [N, h] (the inverse
// of Dispatch).
func (x *EPExchange) Combine(t *autograd.Tape, y *autograd.Var) *autograd.Var {
	back := autograd.Apply(t, sortChunksFn{sizes: x.expertMajor(), order: x.toSourceMajor()}, y)
	return tp.AllToAll(t, x.g, back, x.Send, x.Recv)
}

// srcMajor are the received chunk sizes in arrival order: rank k's rows
// for local expert j at k·local + j.
func (x *EPExchange) srcMajor() []int {
	var s []int
	for _, f := range x.From {
		s = append(s, f...)
	}
	return s
}

// expertMajor are the same chunks ordered expert by expert: (j, k) at
// j·ep + k.
func (x *EPExchange) expertMajor() []int {
	ep, local := len(x.From), len(x.Local)
	s := make([]int, 0, ep*local)
	for j := 0; j < local; j++ {
		for k := 0; k < ep; k++ {
			s = append(s, x.From[k][j])
		}
	}
	return s
}

// toExpertMajor lists the source-major chunks in expert-major order.
func (x *EPExchange) toExpertMajor() []int {
	ep, local := len(x.From), len(x.Local)
	o := make([]int, 0, ep*local)
	for j := 0; j < local; j++ {
		for k := 0; k < ep; k++ {
			o = append(o, k*local+j)
		}
	}
	return o
}

// toSourceMajor lists the expert-major chunks in source-major order.
func (x *EPExchange) toSourceMajor() []int {
	ep, local := len(x.From), len(x.Local)
	o := make([]int, 0, ep*local)
	for k := 0; k < ep; k++ {
		for j := 0; j < local; j++ {
			o = append(o, j*ep+k)
		}
	}
	return o
}

// sortChunksFn reorders the row chunks of x [Σ sizes, h]: output chunk i is
// input chunk order[i] (Megatron's sort_chunks_by_idxs); backward applies
// the inverse order.
type sortChunksFn struct{ sizes, order []int }

func (f sortChunksFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return reorderChunks(in[0].Contiguous(), f.sizes, f.order)
}

func (f sortChunksFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	// The output's chunks are the input's in order: their sizes, and the
	// order that puts them back.
	sizes := make([]int, len(f.order))
	back := make([]int, len(f.order))
	for i, o := range f.order {
		sizes[i] = f.sizes[o]
		back[o] = i
	}
	dx, err := reorderChunks(dy.Contiguous(), sizes, back)
	return []*tensor.Tensor{dx}, err
}

// reorderChunks returns x's row chunks (sizes) in order.
func reorderChunks(x *tensor.Tensor, sizes, order []int) (*tensor.Tensor, error) {
	h := x.Dim(1)
	starts := make([]int, len(sizes))
	n := 0
	for i, s := range sizes {
		starts[i] = n
		n += s
	}
	if n != x.Dim(0) || len(order) != len(sizes) {
		return nil, fmt.Errorf("moe: reordering %d rows in chunks %v by %v", x.Dim(0), sizes, order)
	}
	y := tensor.New(n, h)
	xd, yd := x.Data(), y.Data()
	at := 0
	for _, o := range order {
		copy(yd[at*h:(at+sizes[o])*h], xd[starts[o]*h:(starts[o]+sizes[o])*h])
		at += sizes[o]
	}
	return y, nil
}
