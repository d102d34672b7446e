package data

import "testing"

// megatronBatch is the reference's ramp, computed as it computes it: the
// consumed samples divided by the float samples per increment.
func megatronBatch(r Ramp, global int, consumed int64) int {
	if consumed > int64(r.Samples) {
		return global
	}
	n := (global - r.Start) / r.Increment
	perIncrement := float64(r.Samples) / float64(n)
	return r.Start + int(float64(consumed)/perIncrement)*r.Increment
}

// simulatedIterations counts --train-samples' iterations one at a time.
func simulatedIterations(r Ramp, global int, samples int64) int {
	var c int64
	it := 0
	for c+int64(r.GlobalBatch(global, c)) <= samples {
		c += int64(r.GlobalBatch(global, c))
		it++
	}
	return it
}

// TestRampFollowsMegatron: the global batch of every consumed count equals
// the reference's float formula wherever c·n/Samples is not a whole
// number (at one, the float quotient may land just below it), and
// --train-samples' iterations equal a one-at-a-time count.
func TestRampFollowsMegatron(t *testing.T) {
	for _, c := range []struct{ start, inc, samples, global int }{
		{2, 2, 20, 8}, {16, 16, 1000, 256}, {4, 4, 64, 64}, {8, 8, 3, 32}, {1, 1, 100, 7},
	} {
		r := Ramp{Start: c.start, Increment: c.inc, Samples: c.samples}
		n := int64((c.global - c.start) / c.inc)
		for consumed := int64(0); consumed <= int64(2*c.samples); consumed++ {
			if consumed*n%int64(c.samples) == 0 && consumed <= int64(c.samples) {
				continue
			}
			if got, want := r.GlobalBatch(c.global, consumed), megatronBatch(r, c.global, consumed); got != want {
				t.Fatalf("%+v at %d samples: %d, the reference %d", c, consumed, got, want)
			}
		}
		for _, samples := range []int64{1, int64(c.start), int64(c.samples), int64(c.samples) + 1, 3*int64(c.samples) + 5, 10000} {
			if got, want := r.Iterations(c.global, samples), simulatedIterations(r, c.global, samples); got != want {
				t.Errorf("%+v, %d samples: %d iterations, counted %d", c, samples, got, want)
			}
		}
	}
}
