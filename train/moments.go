package train

import (
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
	momentumOf segmentField = func(s *optim.Segment) []float32 { return s.Momentum }
	mainOf     segmentField = func(s *optim.Segment) []float32 { return s.Value() }
)

// setSegments copies whole-parameter float32 tensors (of the parameters'
// local shapes) into the optimizer's segments, one map per field: each
// rank keeps the part it owns.
func (t *trainer) setSegments(fields []segmentField, maps ...map[*nn.Parameter]*tensor.Tensor) {
	segs := t.opt.Adam().Segments
	for i := range segs {
		s := &segs[i]
		for k, f := range fields {
			copy(f(s), maps[k][s.Param].Data()[s.Offset:s.Offset+s.Len])
		}
	}
}

// mixedPrecision reports whether the model's parameters are 16-bit, with
// float32 main parameters in the optimizer.
func (t *trainer) mixedPrecision() bool { return t.a.ParamDType() != tensor.Float32 }
