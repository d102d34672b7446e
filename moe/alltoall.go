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
// the plan. Every rank of g must call it; a nil g, or one of one rank,
// keeps every row here.
func NewEPExchange(ctx context.Context, g comm.Group, counts []int) (*EPExchange, error) {
	ep, r := GroupSize(g), GroupRank(g)
	e := len(counts)
	if e%ep != 0 {
		return nil, fmt.Errorf("moe: %d experts over %d expert-parallel ranks: the experts must divide evenly", e, ep)
	}
	local := e / ep
	all, err := gatherCounts(ctx, g, counts, "tokens per expert")
	if err != nil {
		return nil, err
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
	if GroupSize(x.g) == 1 {
		return xp
	}
	recv := tp.AllToAll(t, x.g, xp, x.Recv, x.Send) // source-major
	return autograd.Apply(t, sortChunksFn{sizes: srcMajor(x.From), order: toExpertMajor(x.From)}, recv)
}

// Combine returns the local experts' outputs y [Σ Local, h] to the ranks
// that routed them, in each rank's own dispatch order [N, h] (the inverse
// of Dispatch).
func (x *EPExchange) Combine(t *autograd.Tape, y *autograd.Var) *autograd.Var {
	if GroupSize(x.g) == 1 {
		return y
	}
	back := autograd.Apply(t, sortChunksFn{sizes: expertMajor(x.From), order: toSourceMajor(x.From)}, y)
	return tp.AllToAll(t, x.g, back, x.Send, x.Recv)
}

// ETPExchange is the plan of the expert-tensor-parallel step of the
// all-to-all dispatcher: the etp ranks of an expert-TP group hold shards
// of the same local experts, each with its own rows for them (from its
// expert-parallel exchange); every rank gathers all of them, expert by
// expert, and the partial outputs of its shards are reduce-scattered back
// (Megatron's gather_from_sequence_parallel_region and
// reduce_scatter_to_sequence_parallel_region over expt-tp, with
// sort_chunks_by_idxs between).
type ETPExchange struct {
	g comm.Group
	// From[k][j] are expert-TP rank k's rows for local expert j.
	From [][]int
	// Local[j] are local expert j's rows from all ranks; Rows[k] rank k's.
	Local, Rows []int
}

// NewETPExchange gathers every rank's rows per local expert (local) over
// g and returns the plan. Every rank of g must call it; a nil g, or one
// of one rank, gathers nothing.
func NewETPExchange(ctx context.Context, g comm.Group, local []int) (*ETPExchange, error) {
	n, e := GroupSize(g), len(local)
	all, err := gatherCounts(ctx, g, local, "tokens per local expert")
	if err != nil {
		return nil, err
	}
	x := &ETPExchange{g: g, From: make([][]int, n), Local: make([]int, e), Rows: make([]int, n)}
	for k := range n {
		x.From[k] = make([]int, e)
		for j := range e {
			c := int(all[k*e+j])
			x.From[k][j] = c
			x.Local[j] += c
			x.Rows[k] += c
		}
	}
	return x, nil
}

// Dispatch all-gathers every rank's rows xl [Rows[r], h] (expert-major)
// and returns them expert by expert, each expert's rows by rank
// [Σ Local, h]; backward reduce-scatters the gradient.
func (x *ETPExchange) Dispatch(t *autograd.Tape, xl *autograd.Var) *autograd.Var {
	if GroupSize(x.g) == 1 {
		return xl
	}
	all := tp.GatherFromSequenceParallelRegion(t, xl, x.g, true, x.Rows) // rank-major
	return autograd.Apply(t, sortChunksFn{sizes: srcMajor(x.From), order: toExpertMajor(x.From)}, all)
}

// Combine sums the ranks' partial outputs y [Σ Local, h] (Dispatch's
// order) and returns this rank's rows [Rows[r], h].
func (x *ETPExchange) Combine(t *autograd.Tape, y *autograd.Var) *autograd.Var {
	if GroupSize(x.g) == 1 {
		return y
	}
	back := autograd.Apply(t, sortChunksFn{sizes: expertMajor(x.From), order: toSourceMajor(x.From)}, y)
	return tp.ReduceScatterToSequenceParallelRegion(t, back, x.g, x.Rows)
}

// gatherCounts all-gathers every rank's counts over g (nil: this rank's):
// rank k's count j at k·len(mine) + j.
func gatherCounts(ctx context.Context, g comm.Group, mine []int, what string) ([]int64, error) {
	e, r := len(mine), GroupRank(g)
	all := make([]int64, GroupSize(g)*e)
	for j, c := range mine {
		all[r*e+j] = int64(c)
	}
	if GroupSize(g) == 1 {
		return all, nil
	}
	if err := g.AllGather(ctx, comm.I64(all), comm.I64(all[r*e:(r+1)*e])); err != nil {
		return nil, fmt.Errorf("moe: exchanging the %s over %s: %w", what, g.Name(), err)
	}
	return all, nil
}

// The chunk orders of an exchange whose from[k][j] are source rank k's
// rows for local expert j: source-major (k·local + j, the arrival order)
// or expert-major (j·ranks + k).

// srcMajor are the chunk sizes in source-major order.
func srcMajor(from [][]int) []int {
	var s []int
	for _, f := range from {
		s = append(s, f...)
	}
	return s
}

// expertMajor are the chunk sizes in expert-major order.
func expertMajor(from [][]int) []int {
	n, local := len(from), len(from[0])
	s := make([]int, 0, n*local)
	for j := 0; j < local; j++ {
		for k := 0; k < n; k++ {
			s = append(s, from[k][j])
		}
	}
	return s
}

// toExpertMajor lists the source-major chunks in expert-major order.
func toExpertMajor(from [][]int) []int {
	n, local := len(from), len(from[0])
	o := make([]int, 0, n*local)
	for j := 0; j < local; j++ {
		for k := 0; k < n; k++ {
			o = append(o, k*local+j)
		}
	}
	return o
}

// toSourceMajor lists the expert-major chunks in source-major order.
func toSourceMajor(from [][]int) []int {
	n, local := len(from), len(from[0])
	o := make([]int, 0, n*local)
	for k := 0; k < n; k++ {
		for j := 0; j < local; j++ {
			o = append(o, j*n+k)
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
