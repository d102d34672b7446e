package moe

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tp"
)

// AllGatherExchange is the plan of one all-gather dispatch over the tp-ep
// group (Megatron's MoEAllGatherTokenDispatcher): every rank gathers all
// ranks' tokens and routing, runs its local experts (its expert-TP shards
// of experts [r·E/ep, (r+1)·E/ep) for EP rank r) on the tokens routed to
// them, and the partial outputs are reduce-scattered back to the ranks
// that own the tokens, summing the experts and their shards.
type AllGatherExchange struct {
	g            comm.Group
	first, local int
	// D lists the gathered tokens (rank k's token i is row k·T + i) routed
	// to this rank's experts, expert by expert.
	D *Dispatch
}

// NewAllGatherExchange gathers the routing maps [T, E] of every rank of g
// (the tp-ep group) and returns the plan for this rank's local experts
// [first, first+local). Every rank of g must call it with the same T.
func NewAllGatherExchange(ctx context.Context, g comm.Group, m []bool, t, e, first, local int) (*AllGatherExchange, error) {
	ep := g.Size()
	if first < 0 || local < 1 || first+local > e || len(m) != t*e {
		return nil, fmt.Errorf("moe: local experts [%d, %d) of %d (a %d-entry map for %d tokens)", first, first+local, e, len(m), t)
	}
	mine := make([]int64, t*e)
	for i, on := range m {
		if on {
			mine[i] = 1
		}
	}
	all := make([]int64, ep*t*e)
	if err := g.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return nil, fmt.Errorf("moe: gathering the routing maps over %s: %w", g.Name(), err)
	}
	gm := make([]bool, ep*t*e)
	for i, v := range all {
		if j := i % e; v == 1 && j >= first && j < first+local {
			gm[i] = true
		}
	}
	return &AllGatherExchange{g: g, first: first, local: local, D: NewDispatch(gm, ep*t, e)}, nil
}

// Local are the rows of this rank's local experts.
func (x *AllGatherExchange) Local() []int { return x.D.Counts[x.first : x.first+x.local] }

// Dispatch all-gathers x [T, h] over the group and returns the rows routed
// to this rank's experts [Σ Local, h], expert by expert, each expert's rows
// by gathered token; backward reduce-scatters the gradient.
func (x *AllGatherExchange) Dispatch(t *autograd.Tape, x2 *autograd.Var) *autograd.Var {
	all := tp.GatherFromSequenceParallelRegion(t, x2, x.g, true, nil)
	return Permute(t, all, x.D)
}

// Combine weights this rank's expert outputs y [Σ Local, h] by the
// gathered routing probabilities (probs [T, E] of this rank, all-gathered)
// into every gathered token and reduce-scatters the sums back: each rank
// gets its tokens' outputs [T, h] summed over all experts.
func (x *AllGatherExchange) Combine(t *autograd.Tape, y, probs *autograd.Var) *autograd.Var {
	all := tp.GatherFromSequenceParallelRegion(t, probs, x.g, true, nil)
	out := Unpermute(t, y, all, x.D)
	return tp.ReduceScatterToSequenceParallelRegion(t, out, x.g, nil)
}
