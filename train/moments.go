package train

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// moments returns every parameter's Adam moments (exp_avg, exp_avg_sq) as
// tensors of the parameter's shape on this rank. They are views of arrays
// laid out like the gradient buffers, filled from the optimizer's
// segments; under the distributed optimizer each rank fills its shards
// and the arrays are summed over the data-parallel group (every element
// has one owner, the others add zeros), so every rank gets the whole
// moments whatever the data-parallel size. Every rank of the group must
// call it.
func (t *trainer) moments(ctx context.Context) (m, v map[*nn.Parameter]*tensor.Tensor, err error) {
	m, v = map[*nn.Parameter]*tensor.Tensor{}, map[*nn.Parameter]*tensor.Tensor{}
	bufs := t.momentBuffers(m, v)
	for _, s := range t.opt.Segments {
		copy(m[s.Param].Data()[s.Offset:s.Offset+s.Len], s.ExpAvg)
		copy(v[s.Param].Data()[s.Offset:s.Offset+s.Len], s.ExpAvgSq)
	}
	if t.dopt == nil {
		return m, v, nil
	}
	for i, d := range t.ddps {
		g := d.Group()
		if g == nil || g.Size() == 1 {
			continue
		}
		for _, b := range bufs[i] {

			if err := g.AllReduce(ctx, comm.F32(b), comm.Sum); err != nil {
				return nil, nil, fmt.Errorf("gathering the distributed optimizer's state over %s: %w", g.Name(), err)
			}
		}
	}
	return m, v, nil
}

// momentBuffers allocates, per chunk, two zeroed arrays shaped like its
// gradient buffer and sets m[p] and v[p] to views of them at p's range.
// It returns each chunk's pair of arrays.
func (t *trainer) momentBuffers(m, v map[*nn.Parameter]*tensor.Tensor) [][2][]float32 {
	var out [][2][]float32
	for _, d := range t.ddps {
		n := d.Buffer.Layout.Numel
		mb, vb := make([]float32, n), make([]float32, n)
		for _, p := range d.Buffer.Params {
			r, _ := d.Buffer.Range(p)
			m[p] = tensor.FromSlice(mb[r.Start:r.End:r.End], p.Value.Shape()...)
			v[p] = tensor.FromSlice(vb[r.Start:r.End:r.End], p.Value.Shape()...)
		}
		out = append(out, [2][]float32{mb, vb})
	}
	return out
}

// setMoments copies whole-parameter moments (as moments returns them)
// into the optimizer's segments: each rank keeps the part it owns.
func (t *trainer) setMoments(m, v map[*nn.Parameter]*tensor.Tensor) {
	for _, s := range t.opt.Segments {
		copy(s.ExpAvg, m[s.Param].Data()[s.Offset:s.Offset+s.Len])
		copy(s.ExpAvgSq, v[s.Param].Data()[s.Offset:s.Offset+s.Len])
	}
}
