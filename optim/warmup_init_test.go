package optim

import (
	"math"
	"testing"
)

// TestWarmupInit: --lr-warmup-init starts the warmup there and rises
// linearly to the peak (Megatron's init_lr); 0 is the usual warmup from 0,
// bit for bit.
func TestWarmupInit(t *testing.T) {
	s := Schedule{MaxLR: 1e-3, MinLR: 1e-4, InitLR: 2e-4, Style: "cosine", WarmupIters: 4, DecayIters: 10}
	for step, want := range map[int]float64{0: 2e-4, 2: 2e-4 + 0.5*(1e-3-2e-4), 4: 1e-3} {
		if got := s.LR(step); math.Abs(got-want) > 1e-18 {
			t.Errorf("step %d: %g, want %g", step, got, want)
		}
	}
	s.InitLR = 0
	if got, want := s.LR(3), 1e-3*3.0/4.0; got != want {
		t.Errorf("no init: %v, want %v bit for bit", got, want)
	}
	s.InitLR = -1
	if err := s.Validate(); err == nil {
		t.Error("a negative --lr-warmup-init was accepted")
	}
}
