package optim

import (
	"fmt"
	"strings"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// AdamConfig holds Adam's fixed hyper-parameters (Megatron's
// --adam-beta1, --adam-beta2, --adam-eps); the learning rate and the
// weight decay, which the schedule sets, come with each step (Hyper).
type AdamConfig struct {
	Beta1, Beta2, Eps float32
	// Decoupled selects AdamW's decoupled weight decay
	// (p ← p·(1 − lr·wd) before the Adam update), which is what Megatron's
	// Adam does; false adds wd·p to the gradient instead (torch.optim.Adam).
	Decoupled bool
	// Workers is the number of goroutines an update may use (0 or 1: the
	// caller's only). It changes no result.
	Workers int
	// SGD replaces Adam by torch.optim.SGD (--optimizer sgd) with
	// Momentum (--sgd-momentum; 0: none) and the weight decay added to
	// the gradient; β1, β2, ε and Decoupled are then unused.
	SGD      bool
	Momentum float32
}

// newState gives a segment its zero optimizer state: Adam's two moments,
// or SGD's momentum buffer (none without momentum).
func (c AdamConfig) newState(s *Segment) {
	switch {
	case !c.SGD:
		s.ExpAvg, s.ExpAvgSq = make([]float32, s.Len), make([]float32, s.Len)
	case c.Momentum != 0:
		s.Momentum = make([]float32, s.Len)
	}
}

// Segment is a contiguous run of one parameter's elements that an
// optimizer updates, with its Adam moments: elements [Offset, Offset+Len)
// of the flattened parameter. The plain optimizer has one segment per
// parameter; the distributed optimizer one per piece of a parameter in
// this rank's shards.
type Segment struct {
	Param       *nn.Parameter
	Offset, Len int
	// ExpAvg and ExpAvgSq are Adam's first and second moments (fp32), Len
	// elements each; nil under SGD.
	ExpAvg, ExpAvgSq []float32
	// Momentum is SGD's momentum_buffer (fp32, Len elements); nil under
	// Adam, and under SGD without momentum.
	Momentum []float32
	// Main holds the float32 main parameters of a 16-bit parameter's
	// elements (Megatron's fp32 main params), Len elements; nil for a
	// float32 parameter, which is its own main parameter.
	Main []float32
	// MainGrad holds the float32 copy of a 16-bit gradient's elements
	// (CopyGradsToMain); nil for a float32 gradient, which the optimizer
	// reads in place.
	MainGrad []float32
	// Model and GradSrc, when set, hold the segment's parameter elements
	// (in the parameter's type) and its float32 gradient apart from Param,
	// whose Value and Grad are whole only while a pass uses them
	// (dp.ShardPiece of an FSDP's shards). The zero Buffers: the elements
	// are Param's Value and Grad at Offset.
	Model, GradSrc comm.Buffer
}

// Value returns the segment's main parameters: Main, or the float32
// parameter's own elements.
func (s *Segment) Value() []float32 {
	switch {
	case s.Main != nil:
		return s.Main
	case s.Model.Len() > 0:
		return s.Model.Float32s()
	}
	return s.Param.Value.Data()[s.Offset : s.Offset+s.Len]
}

// modelBits returns the 16-bit parameter elements the main parameters
// are rounded into.
func (s *Segment) modelBits() []uint16 {
	if s.Model.Len() > 0 {
		return s.Model.Uint16s()
	}
	return s.Param.Value.Bits()[s.Offset : s.Offset+s.Len]
}

// HasGrad reports whether the segment has a gradient to update with.
func (s *Segment) HasGrad() bool { return s.GradSrc.Len() > 0 || s.Param.Grad != nil }

// Grad returns the segment's main gradient: MainGrad, or the view of a
// float32 gradient.
func (s *Segment) Grad() []float32 {
	switch {
	case s.MainGrad != nil:
		return s.MainGrad
	case s.GradSrc.Len() > 0:
		return s.GradSrc.Float32s()
	}
	return s.Param.Grad.Data()[s.Offset : s.Offset+s.Len]
}

// initMain gives a segment of a 16-bit parameter its float32 main
// parameters: the parameter's values, widened.
func (s *Segment) initMain() {
	d := s.Param.Value.DType()
	if !d.IsHalf() {
		return
	}
	s.Main = make([]float32, s.Len)
	tensor.WidenInto(d, s.Main, s.modelBits())
}

// Adam is the Adam optimizer over segments of parameters, holding fp32
// exp_avg and exp_avg_sq for each — or, with AdamConfig.SGD, Megatron's
// other optimizer, SGD, holding its momentum buffer.
//
// As in Megatron, weight decay applies only to parameters with two or more
// dimensions: biases and LayerNorm parameters are not decayed
// (NoWeightDecay).
type Adam struct {
	Config   AdamConfig
	Segments []Segment
	// Steps is the number of updates taken (torch's state["step"]).
	Steps int
}

// NewAdam returns an optimizer with zero moments for params, one segment
// per parameter.
func NewAdam(params []*nn.Parameter, cfg AdamConfig) *Adam {
	o := &Adam{Config: cfg}
	for _, p := range params {
		n := p.Value.Len()
		o.Segments = append(o.Segments, Segment{Param: p, Len: n})
		s := &o.Segments[len(o.Segments)-1]
		cfg.newState(s)
		s.initMain()
	}
	return o
}

// NewAdamSegments returns an optimizer with zero moments for the given
// segments (Param, Offset and Len set; the moments are allocated).
func NewAdamSegments(segs []Segment, cfg AdamConfig) *Adam {
	o := &Adam{Config: cfg, Segments: segs}
	for i := range o.Segments {
		s := &o.Segments[i]
		cfg.newState(s)
		s.initMain()
	}
	return o
}

// StateElements returns the number of fp32 values of optimizer state the
// optimizer holds (both moments and the main parameters of 16-bit
// parameters).
func (o *Adam) StateElements() int {
	n := 0
	for _, s := range o.Segments {
		n += len(s.ExpAvg) + len(s.ExpAvgSq) + len(s.Momentum) + len(s.Main)
	}
	return n
}

// update returns the step of segment s's elements [lo, hi) of its main
// parameters pd (s.Value) with h (the segment's weight decay): Adam's, or
// SGD's.
func (o *Adam) update(s *Segment, pd []float32, h Hyper) func(lo, hi int) {
	gd := s.Grad()
	if o.Config.SGD {
		sh := kernels.SGDHyper{LR: h.LR, Momentum: o.Config.Momentum, WeightDecay: h.WeightDecay}
		return func(lo, hi int) {
			var buf []float32
			if s.Momentum != nil {
				buf = s.Momentum[lo:hi]
			}
			kernels.SGDStep(pd[lo:hi], gd[lo:hi], buf, sh)
		}
	}
	ah := kernels.AdamHyper{LR: h.LR, Beta1: o.Config.Beta1, Beta2: o.Config.Beta2, Eps: o.Config.Eps,
		WeightDecay: h.WeightDecay, Step: o.Steps, Decoupled: o.Config.Decoupled}
	m, v := s.ExpAvg, s.ExpAvgSq
	return func(lo, hi int) { kernels.AdamStep(pd[lo:hi], gd[lo:hi], m[lo:hi], v[lo:hi], ah) }
}

// minAdamWork is the least number of elements worth a goroutine in Step.
const minAdamWork = 1 << 15

// NoWeightDecay reports whether p is exempt from weight decay: biases and
// every 1-d parameter (Megatron's default no_weight_decay_cond).
func NoWeightDecay(p *nn.Parameter) bool {
	return p.Value.Rank() == 1 || strings.HasSuffix(p.Name, ".bias")
}

// Step applies one update with hp's learning rate lr and weight decay wd
// to every segment whose parameter has a gradient:
//
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//	p ← p − lr·(m/(1−β1ᵗ)) / (sqrt(v)/sqrt(1−β2ᵗ) + eps)
//
// with the weight decay wd (none for NoWeightDecay's parameters) applied
// as AdamConfig.Decoupled says (torch.optim.Adam/AdamW order of
// operations).
func (o *Adam) Step(hp Hyper) error {
	o.Steps++
	for i := range o.Segments {
		s := &o.Segments[i]
		p := s.Param
		if !s.HasGrad() {
			continue
		}
		if s.GradSrc.Len() == 0 && (!p.Grad.IsContiguous() || p.Grad.Len() != p.Value.Len()) {
			return fmt.Errorf("optim: parameter %q has a gradient of shape %v for a value of shape %v", p.Name, p.Grad.Shape(), p.Value.Shape())
		}
		wd := hp.WeightDecay
		if NoWeightDecay(p) {
			wd = 0
		}
		pd := s.Value()
		update := o.update(s, pd, Hyper{LR: hp.LR, WeightDecay: wd})
		var model []uint16
		if s.Main != nil {
			model = s.modelBits()
		}
		kernels.ParallelFor(len(pd), max(1, min(o.Config.Workers, len(pd)/minAdamWork)), func(lo, hi int) {
			update(lo, hi)
			if model != nil { // the 16-bit model parameters follow their main copy
				tensor.RoundInto(p.Value.DType(), model[lo:hi], pd[lo:hi])
			}
		})
	}
	return nil
}
