package optim

import (
	"context"
	"math"
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
		{Schedule{MaxLR: 1, MinLR: 0, Style: "inverse-square-root", WarmupIters: 4}, 16, 0.5},
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

func TestAdamDecaysOnlyMatrices(t *testing.T) {
	w := nn.NewParameter("layer.weight", tensor.Full(1, 2, 2))
	b := nn.NewParameter("layer.bias", tensor.Full(1, 2))
	for _, p := range []*nn.Parameter{w, b} {
		p.Grad = tensor.New(p.Value.Shape()...) // zero gradient: only decay moves p
	}
	o := NewAdam([]*nn.Parameter{w, b}, AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5, Decoupled: true})
	if err := o.Step(0.1); err != nil {
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
