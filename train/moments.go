package train

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/tensor"
)

// segmentField selects one float32 array of an optimizer segment: a
// moment, or the main parameters.
type segmentField func(s *optim.Segment) []float32

var (
	expAvgOf   segmentField = func(s *optim.Segment) []float32 { return s.ExpAvg }
	expAvgSqOf segmentField = func(s *optim.Segment) []float32 { return s.ExpAvgSq }
	mainOf     segmentField = func(s *optim.Segment) []float32 { return s.Value() }
)

// moments returns every parameter's Adam moments (exp_avg, exp_avg_sq) as
// tensors of the parameter's shape on this rank (segmentTensors).
func (t *trainer) moments(ctx context.Context) (m, v map[*nn.Parameter]*tensor.Tensor, err error) {
	out, err := t.segmentTensors(ctx, expAvgOf, expAvgSqOf)
	if err != nil {
		return nil, nil, err
	}
	return out[0], out[1], nil
}

// segmentTensors returns, for each field, every parameter's values of that
// field as float32 tensors of the parameter's shape on this rank. They are
// views of arrays laid out like the gradient buffers, filled from the
// optimizer's segments; under the distributed optimizer each rank fills
// its shards and the arrays are summed over the data-parallel group (every
// element has one owner, the others add zeros), so every rank gets whole
// tensors whatever the data-parallel size. Every rank of the group must
// call it.
func (t *trainer) segmentTensors(ctx context.Context, fields ...segmentField) ([]map[*nn.Parameter]*tensor.Tensor, error) {
	maps := make([]map[*nn.Parameter]*tensor.Tensor, len(fields))
	for i := range maps {
		maps[i] = map[*nn.Parameter]*tensor.Tensor{}
	}
	bufs := t.stateBuffers(maps...)
	for i := range t.opt.Segments {
		s := &t.opt.Segments[i]
		for k, f := range fields {
			copy(maps[k][s.Param].Data()[s.Offset:s.Offset+s.Len], f(s))
		}
	}
	if t.dopt == nil {
		return maps, nil
	}
	for i, d := range t.ddps {
		g := d.Group()
		if g == nil || g.Size() == 1 {
			continue
		}
		for _, b := range bufs[i] {
			if err := g.AllReduce(ctx, comm.F32(b), comm.Sum); err != nil {
				return nil, fmt.Errorf("gathering the distributed optimizer's state over %s: %w", g.Name(), err)
			}
		}
	}
	return maps, nil
}

// stateBuffers allocates, per chunk and per map, a zeroed float32 array
// shaped like the chunk's gradient buffer and sets each map's entry for p
// to a view of it at p's range. It returns each chunk's arrays.
func (t *trainer) stateBuffers(maps ...map[*nn.Parameter]*tensor.Tensor) [][][]float32 {
	var out [][][]float32
	for _, d := range t.ddps {
		n := d.Buffer.Layout.Numel
		var arrays [][]float32
		for _, m := range maps {
			b := make([]float32, n)
			for _, p := range d.Buffer.Params {
				r, _ := d.Buffer.Range(p)
				m[p] = tensor.FromSlice(b[r.Start:r.End:r.End], p.Value.Shape()...)
			}
			arrays = append(arrays, b)
		}
		out = append(out, arrays)
	}
	return out
}

// setSegments copies whole-parameter float32 tensors (as segmentTensors
// returns them) into the optimizer's segments, one map per field: each
// rank keeps the part it owns.
func (t *trainer) setSegments(fields []segmentField, maps ...map[*nn.Parameter]*tensor.Tensor) {
	for i := range t.opt.Segments {
		s := &t.opt.Segments[i]
		for k, f := range fields {
			copy(f(s), maps[k][s.Param].Data()[s.Offset:s.Offset+s.Len])
		}
	}
}

// mixedPrecision reports whether the model's parameters are 16-bit, with
// float32 main parameters in the optimizer.
func (t *trainer) mixedPrecision() bool { return t.a.ParamDType() != tensor.Float32 }
