package train

import (
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
