package train

import (
	"context"
	"math"
	"testing"
)

// TestSpikyLoss is --check-for-spiky-loss's rule: the first 100 finite
// losses are recorded and never spike; then a loss of at least 10 times
// their largest magnitude does; NaN and infinity never do.
func TestSpikyLoss(t *testing.T) {
	var c spikyCheck
	for i := range spikyLossSamples {
		if c.spike(float64(1+i%3) * 1e3) {
			t.Fatalf("sample %d spiked", i)
		}
	}
	for _, x := range []struct {
		loss  float64
		spike bool
	}{{2e3, false}, {29999, false}, {3e4, true}, {-3e4, true}, {math.NaN(), false}, {math.Inf(1), false}} {
		if got := c.spike(x.loss); got != x.spike {
			t.Errorf("loss %g after the samples (largest 3000): spike %v, want %v", x.loss, got, x.spike)
		}
	}
}

// TestFP16DynamicScalingSkipsNaN: under --fp16 with the dynamic loss
// scaler a non-finite loss or gradient skips the step, as the reference,
// which turns --check-for-nan-in-loss-and-grad off there: a run with an
// absurd learning rate skips iterations and does not stop.
func TestFP16DynamicScalingSkipsNaN(t *testing.T) {
	for _, mode := range []string{RerunDisabled, RerunValidateResults} {
		a := mockArgs(30)
		a.Model.FP16, a.RerunMode = true, mode
		a.LR, a.LRWarmupIters, a.ClipGrad, a.LRDecayStyle = 1e6, 0, 0, "constant"
		res, err := Run(context.Background(), a, Options{})
		if err != nil || res.Skipped == 0 {
			t.Fatalf("--rerun-mode %s: skipped %v iterations, error %v; want skipped iterations and no error", mode, res, err)
		}
	}
}
