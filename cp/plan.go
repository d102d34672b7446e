package cp

import (
	"fmt"

	"github.com/gotron/gotron/comm"
)

// plan is how one attention call runs on this rank: the optional
// all-to-all that trades sequence for heads, then blockwise attention of
// the local queries against the keys and values of the ring's (or the
// gather's) members.
type plan struct {
	cp, rank int // the context-parallel size and this rank's index

	// a is the all-to-all size (1: none) over inner; after it the rank
	// holds the sequence rows of inner's a members for h/a of the heads.
	a     int
	inner comm.Group
	// ring is the group K and V cross (nil: attention is local after the
	// all-to-all); gather says all-gather rather than pass around.
	ring   comm.Group
	gather bool

	b, h, d, c int // batch, heads after the all-to-all, head dim, chunk rows
	sl         int // the rank's rows before the all-to-all (s/cp)
	// heads is the heads on the rank before the all-to-all, headBase this
	// rank's first head among them after it (dropout keys).
	heads, headBase int
}

// newPlan checks the call's shapes and groups: qkv [s/cp, b, heads·3·d].
func newPlan(o Options, shape []int, heads int) (*plan, error) {
	if len(shape) != 3 || heads <= 0 || shape[2]%(3*heads) != 0 {
		return nil, fmt.Errorf("cp: attention: qkv %v is not [s/cp, b, heads·3·head_dim] with %d heads", shape, heads)
	}
	p := &plan{cp: o.Groups.Size(), rank: o.Groups.Rank(), a: 1, b: shape[1], heads: heads, h: heads, d: shape[2] / (3 * heads)}
	if p.cp > 1 {
		switch o.Type {
		case P2P:
			p.ring = o.Groups.CP
		case AllGather:
			p.ring, p.gather = o.Groups.CP, true
		case A2A:
			p.inner = o.Groups.CP
		case A2AP2P:
			if o.Groups.Inner == nil {
				return nil, fmt.Errorf("cp: a2a+p2p attention needs hierarchical_context_parallel_sizes: set --hierarchical-context-parallel-sizes")
			}
			p.inner, p.ring = o.Groups.Inner, o.Groups.Outer
		default:
			return nil, fmt.Errorf("cp: attention: unknown cp_comm_type %q", o.Type)
		}
	}
	if p.inner != nil {
		p.a = p.inner.Size()
		if heads%p.a != 0 {
			return nil, fmt.Errorf("cp: %s attention: the %d heads of a tensor-parallel rank are not divisible by the all-to-all size %d: choose num_attention_heads a multiple of %d·tensor_model_parallel_size", o.Type, heads, p.a, p.a)
		}
		p.h = heads / p.a
		p.headBase = p.inner.Rank() * p.h
	}
	if shape[0]%2 != 0 && p.cp > 1 {
		return nil, fmt.Errorf("cp: attention: %d local rows are not two equal chunks", shape[0])
	}
	p.sl, p.c = shape[0], shape[0]
	if p.cp > 1 {
		p.c = shape[0] / 2
	}
	if o.Segments != nil && len(o.Segments) != p.b*p.seq() {
		return nil, fmt.Errorf("cp: attention: %d segment ids for %d batch rows of %d positions (the whole sequence of %d context-parallel ranks' %d rows)", len(o.Segments), p.b, p.seq(), max(p.cp, 1), p.sl)
	}
	return p, nil
}

// seq is the whole sequence's length: 2·cp chunks of c rows (c for one
// rank).
func (p *plan) seq() int {
	if p.cp > 1 {
		return 2 * p.cp * p.c
	}
	return p.c
}

// chunksOf returns the chunk indices (in local row order, after the
// all-to-all) of the ring member j, or of this rank for j = −1: the
// chunks of the a consecutive CP ranks its all-to-all group holds.
func (p *plan) chunksOf(j int) []int {
	if p.cp == 1 {
		return []int{0}
	}
	// The all-to-all groups are consecutive CP ranks; ring member j is CP
	// rank (rank mod a) + a·j, whose all-to-all group starts at a·j.
	base := (p.rank / p.a) * p.a
	if j >= 0 {
		base = j * p.a
	}
	out := make([]int, 0, 2*p.a)
	for m := range p.a {
		k := Chunks(p.cp, base+m)
		out = append(out, k[0], k[1])
	}
	return out
}

// rows is the local rows after the all-to-all; pairs the (batch row,
// head) pairs.
func (p *plan) rows() int  { return p.a * p.sl }
func (p *plan) pairs() int { return p.b * p.h }
