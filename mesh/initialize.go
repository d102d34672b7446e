package mesh

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
)

// Groups is one rank's communicator for every group kind of its Layout
// (Megatron's ProcessGroupCollection), created by Initialize.
type Groups struct {
	Layout *Layout
	// World is the group of all ranks.
	World comm.Group
	// Rank is this rank's global rank.
	Rank   int
	byName map[string]comm.Group
}

// Initialize builds the layout for the world group's size and creates
// every group kind as a communicator, eagerly and in Layout.Names() order
// on every rank (Megatron's initialize_model_parallel). s.World is set from
// the world group. A rank that belongs to no group of a kind (pos-embd on a
// middle pipeline stage, say) gets nil for it.
func Initialize(ctx context.Context, world comm.Group, s Sizes) (*Groups, error) {
	s.World = world.Size()
	l, err := Build(s)
	if err != nil {
		return nil, err
	}
	g := &Groups{Layout: l, World: world, Rank: world.Rank(), byName: map[string]comm.Group{}}
	for _, name := range l.Names() {
		sub, err := world.NewSubgroups(ctx, name, l.Groups(name))
		if err != nil {
			return nil, fmt.Errorf("mesh: creating the %s groups: %w", name, err)
		}
		g.byName[name] = sub
	}
	return g, nil
}

// Get returns this rank's group of the named kind (nil if it is in none).
// It panics on a name that is not a group kind: a programmer bug.
func (g *Groups) Get(name string) comm.Group {
	sub, ok := g.byName[name]
	if !ok {
		panic(fmt.Sprintf("mesh: no group kind %q", name))
	}
	return sub
}

// TP returns the tensor-parallel group.
func (g *Groups) TP() comm.Group { return g.Get(GroupTP) }

// PP returns the pipeline-parallel group.
func (g *Groups) PP() comm.Group { return g.Get(GroupPP) }

// DP returns the data-parallel group without context parallelism.
func (g *Groups) DP() comm.Group { return g.Get(GroupDP) }

// DPCP returns the data-parallel group with context parallelism, over which
// gradients are reduced.
func (g *Groups) DPCP() comm.Group { return g.Get(GroupDPCP) }

// CP returns the context-parallel group.
func (g *Groups) CP() comm.Group { return g.Get(GroupCP) }
