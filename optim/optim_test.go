package optim

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

func TestScheduleValues(t *testing.T) {
	// Values worked by hand from Megatron's OptimizerParamScheduler formulas.
	cases := []struct {
		s    Schedule
		step int
		want float64
	}{
		{Schedule{MaxLR: 1, MinLR: 0.1, Style: "linear", WarmupIters: 10, DecayIters: 110}, 0, 0},
		{Schedule{MaxLR: 1, MinLR: 0.1, Style: "linear", WarmupIters: 10, DecayIters: 110}, 5, 0.5},
		{Schedule{MaxLR: 1, MinLR: 0.1, Style: "linear", WarmupIters: 10, DecayIters: 110}, 10, 1},
		{Schedule{MaxLR: 1, MinLR: 0.1, Style: "linear", WarmupIters: 10, DecayIters: 110}, 60, 0.55},
		{Schedule{MaxLR: 1, MinLR: 0.1, Style: "linear", WarmupIters: 10, DecayIters: 110}, 200, 0.1},
		{Schedule{MaxLR: 1, MinLR: 0, Style: "cosine", WarmupIters: 0, DecayIters: 100}, 50, 0.5},
		{Schedule{MaxLR: 1, MinLR: 0, Style: "cosine", WarmupIters: 0, DecayIters: 100}, 25, 0.5 * (math.Cos(math.Pi/4) + 1)},
		{Schedule{MaxLR: 2, MinLR: 0, Style: "constant", WarmupIters: 4, DecayIters: 8}, 7, 2},
		{Schedule{MaxLR: 1, MinLR: 0, Style: "inverse-square-root", WarmupIters: 4, DecayIters: 100}, 16, 0.5},
		// Past the decay, min_lr whatever the style (get_lr checks it
		// before inverse-square-root's branch).
		{Schedule{MaxLR: 1, MinLR: 0.01, Style: "inverse-square-root", WarmupIters: 4, DecayIters: 20}, 20, 1 / math.Sqrt(5)},
		{Schedule{MaxLR: 1, MinLR: 0.01, Style: "inverse-square-root", WarmupIters: 4, DecayIters: 20}, 21, 0.01},
	}
	for _, c := range cases {
		if got := c.s.LR(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v at step %d: %g, want %g", c.s, c.step, got, c.want)
		}
	}
	if err := (Schedule{MaxLR: 1, Style: "stepwise"}).Validate(); err == nil {
		t.Error("an unknown decay style was accepted")
	}
}

// TestWSDAndWeightDecayValues: WSD's stable phase and its four annealing
// shapes, and the weight decay's linear and cosine increments, worked by
// hand from Megatron's OptimizerParamScheduler (get_lr's WSD branch,
// get_wd); and the settings Megatron asserts against, refused.
func TestWSDAndWeightDecayValues(t *testing.T) {
	wsd := func(style string) Schedule {
		return Schedule{MaxLR: 1, MinLR: 0.1, Style: "WSD", WarmupIters: 10, DecayIters: 110, WSDDecayIters: 20, WSDStyle: style}
	}
	for _, c := range []struct {
		s    Schedule
		step int
		want float64
	}{
		{wsd("exponential"), 5, 0.5}, // warmup
		{wsd("exponential"), 60, 1},  // stable
		{wsd("exponential"), 90, 1},  // the annealing's start
		{wsd("exponential"), 100, 0.1 + 0.9*(2*math.Sqrt(0.5)-1)},
		{wsd("exponential"), 110, 0.1}, // its end
		{wsd("exponential"), 111, 0.1}, // past the decay
		{wsd("linear"), 100, 0.55},
		{wsd("cosine"), 95, 0.1 + 0.9*0.5*(math.Cos(math.Pi/4)+1)},
		{wsd("minus_sqrt"), 100, 0.1 + 0.9*(1-math.Sqrt(0.5))},
	} {
		if got := c.s.LR(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("WSD %s at step %d: %.15g, want %.15g", c.s.WSDStyle, c.step, got, c.want)
		}
	}
	wd := func(style string) Schedule {
		return Schedule{StartWD: 0, EndWD: 0.1, WDIncrIters: 100, WDIncrStyle: style}
	}
	for _, c := range []struct {
		s    Schedule
		step int
		want float64
	}{
		{wd("linear"), 0, 0}, {wd("linear"), 50, 0.05}, {wd("linear"), 100, 0.1}, {wd("linear"), 150, 0.1},
		{wd("cosine"), 25, 0.1 * 0.5 * (math.Cos(math.Pi*0.75) + 1)}, {wd("cosine"), 50, 0.05},
		{Schedule{StartWD: 0.3, EndWD: 0.3, WDIncrIters: 100, WDIncrStyle: "constant"}, 7, 0.3},
	} {
		if got := c.s.WD(c.step); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("weight decay %s at step %d: %.15g, want %.15g", c.s.WDIncrStyle, c.step, got, c.want)
		}
	}
	base := Schedule{MaxLR: 1, Style: "linear", DecayIters: 100, StartWD: 0.1, EndWD: 0.1, WDIncrIters: 100, WDIncrStyle: "constant"}
	for _, c := range []struct {
		edit func(s *Schedule)
		want string
	}{
		{func(s *Schedule) { s.Style, s.WSDStyle = "WSD", "exponential" }, "--lr-wsd-decay-iters"},
		{func(s *Schedule) { s.Style, s.WSDStyle, s.WSDDecayIters = "WSD", "step", 10 }, "--lr-wsd-decay-style"},
		{func(s *Schedule) { s.Style, s.WSDStyle, s.WSDDecayIters = "WSD", "linear", 101 }, "between 1 and"},
		{func(s *Schedule) { s.EndWD = 0.2 }, "constant"},
		{func(s *Schedule) { s.WDIncrStyle = "step" }, "--weight-decay-incr-style"},
		{func(s *Schedule) { s.WDIncrStyle, s.WDIncrIters = "linear", 0 }, "length"},
		{func(s *Schedule) { s.StartWD = -1 }, "≥ 0"},
		{func(s *Schedule) { s.WDIncrStyle, s.StartWD, s.EndWD = "linear", 0.1, 0 }, "end ≥ start"},
	} {
		s := base
		c.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", s, err, c.want)
		}
	}
	if err := base.Validate(); err != nil {
		t.Errorf("a valid schedule refused: %v", err)
	}
}

func TestAdamDecaysOnlyMatrices(t *testing.T) {
	w := nn.NewParameter("layer.weight", tensor.Full(1, 2, 2))
	b := nn.NewParameter("layer.bias", tensor.Full(1, 2))
	for _, p := range []*nn.Parameter{w, b} {
		p.Grad = tensor.New(p.Value.Shape()...) // zero gradient: only decay moves p
	}
	o := NewAdam([]*nn.Parameter{w, b}, AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decoupled: true})
	if err := o.Step(Hyper{LR: 0.1, WeightDecay: 0.5}); err != nil {
		t.Fatal(err)
	}
	if got := w.Value.Data()[0]; math.Abs(float64(got)-0.95) > 1e-7 {
		t.Errorf("weight after decoupled decay: %v, want 1·(1 − 0.1·0.5) = 0.95", got)
	}
	if got := b.Value.Data()[0]; got != 1 {
		t.Errorf("bias changed to %v: biases are not decayed", got)
	}
}

func TestClipGradients(t *testing.T) {
	p := nn.NewParameter("w", tensor.New(2))
	p.Grad = tensor.FromSlice([]float32{3, 4}, 2)
	o := NewAdam([]*nn.Parameter{p}, AdamConfig{})
	norm, err := GlobalNorm(context.Background(), o.SumSquares(nil), nil)
	if err != nil || norm != 5 {
		t.Fatalf("norm %v, want 5", norm)
	}
	if !o.ClipGradients(norm, 1) {
		t.Fatal("not clipped")
	}
	g := p.Grad.Data()
	if math.Abs(float64(g[0])-0.6) > 1e-6 || math.Abs(float64(g[1])-0.8) > 1e-6 {
		t.Errorf("clipped gradient %v, want [0.6 0.8]", g)
	}
	if o.ClipGradients(1, 2) {
		t.Error("clipped a gradient below the maximum")
	}
}
