package cp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
)

// toHeads is the all-to-all from sequence-sharded to head-sharded (Ulysses,
// Jacobs et al. 2023, arXiv 2309.14509): x [sl, b, heads·w] (w values per
// head) on each of the a members of g becomes [a·sl, b, (heads/a)·w], the
// rows of members 0 … a−1 in order, for this member's heads/a heads.
func (p *plan) toHeads(ctx context.Context, g comm.Group, x []float32, w int) ([]float32, error) {
	a, sl, b := p.a, p.sl, p.b
	hw := p.h * w // one member's columns
	in := make([]float32, len(x))
	for j := range a {
		part := in[j*sl*b*hw:]
		for r := range sl * b {
			copy(part[r*hw:(r+1)*hw], x[r*a*hw+j*hw:r*a*hw+(j+1)*hw])
		}
	}
	out := make([]float32, len(x))
	if err := g.AllToAll(ctx, comm.F32(out), comm.F32(in)); err != nil {
		return nil, fmt.Errorf("cp: all-to-all over %s: %w", g.Name(), err)
	}
	return out, nil
}

// toSequence is toHeads' inverse: y [a·sl, b, (heads/a)·w] becomes
// [sl, b, heads·w].
func (p *plan) toSequence(ctx context.Context, g comm.Group, y []float32, w int) ([]float32, error) {
	a, sl, b := p.a, p.sl, p.b
	hw := p.h * w
	in := make([]float32, len(y))
	if err := g.AllToAll(ctx, comm.F32(in), comm.F32(y)); err != nil {
		return nil, fmt.Errorf("cp: all-to-all over %s: %w", g.Name(), err)
	}
	x := make([]float32, len(y))
	for j := range a {
		part := in[j*sl*b*hw:]
		for r := range sl * b {
			copy(x[r*a*hw+j*hw:r*a*hw+(j+1)*hw], part[r*hw:(r+1)*hw])
		}
	}
	return x, nil
}
