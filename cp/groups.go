package cp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/mesh"
)

// CommType is how attention crosses the context-parallel ranks, named as
// Megatron's cp_comm_type.
type CommType string

// The attention communication types.
const (
	// P2P is ring attention: K and V blocks travel around the CP ring while
	// each rank attends to the block it holds.
	P2P CommType = "p2p"
	// AllGather all-gathers K and V; the backward reduce-scatters dK, dV.
	AllGather CommType = "all_gather"
	// A2A is Ulysses: an all-to-all from sequence-sharded to head-sharded,
	// whole-sequence attention on cp-th of the heads, and back.
	A2A CommType = "a2a"
	// A2AP2P is hierarchical: all-to-all inside the first level of
	// hierarchical_context_parallel_sizes, ring across the second.
	A2AP2P CommType = "a2a+p2p"
)

// Groups are a rank's context-parallel groups.
type Groups struct {
	// CP is the context-parallel group: its rank r holds chunks r and
	// 2·cp−1−r of every sequence.
	CP comm.Group
	// Inner and Outer are the levels of hierarchical context parallelism
	// (nil without it): Inner holds consecutive CP ranks (the all-to-all
	// of a2a+p2p), Outer the CP ranks with the same Inner rank (the ring).
	Inner, Outer comm.Group
}

// NewGroups returns the groups of the context-parallel group cpg; with
// hierarchical sizes [a, b] (a·b = cp), it splits cpg into its levels as
// Megatron's create_hierarchical_groups does (mesh.HierarchicalGroups):
// level 0 the consecutive ranks [0, a), [a, 2a), …, level 1 the ranks
// i, i+a, i+2a, …. It is a collective over cpg.
func NewGroups(ctx context.Context, cpg comm.Group, hierarchical []int) (*Groups, error) {
	g := &Groups{CP: cpg}
	if len(hierarchical) == 0 {
		return g, nil
	}
	if len(hierarchical) != 2 {
		return nil, fmt.Errorf("cp: hierarchical_context_parallel_sizes %v: a2a+p2p needs two levels, the all-to-all size and the ring size", hierarchical)
	}
	ranks := make([]int, cpg.Size())
	for i := range ranks {
		ranks[i] = i
	}
	levels, err := mesh.HierarchicalGroups(ranks, hierarchical)
	if err != nil {
		return nil, fmt.Errorf("cp: %w", err)
	}
	if g.Inner, err = cpg.NewSubgroups(ctx, cpg.Name()+"-a2a", levels[0]); err != nil {
		return nil, err
	}
	if g.Outer, err = cpg.NewSubgroups(ctx, cpg.Name()+"-p2p", levels[1]); err != nil {
		return nil, err
	}
	return g, nil
}

// Size returns the context-parallel size (1 for nil groups).
func (g *Groups) Size() int {
	if g == nil || g.CP == nil {
		return 1
	}
	return g.CP.Size()
}

// Rank returns the rank in the context-parallel group (0 for nil groups).
func (g *Groups) Rank() int {
	if g == nil || g.CP == nil {
		return 0
	}
	return g.CP.Rank()
}
