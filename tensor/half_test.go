package tensor

import (
	"math"
	"testing"
)

// TestHalfRoundTrip checks round-to-nearest-even on values worked by hand
// and that widening is exact.
func TestHalfRoundTrip(t *testing.T) {
	// bfloat16 keeps 8 significand bits: 1 + 2^-8 is a tie between 1 and
	// 1 + 2^-7 and rounds to even (1); 1 + 3·2^-8 rounds up to 1 + 2^-6.
	in := FromSlice([]float32{1, 1 + 1.0/256, 1 + 3.0/256, -2.5, float32(math.Inf(1))}, 5)
	got := ToHalf(in, BFloat16).Float32().Data()
	want := []float32{1, 1, 1 + 4.0/256, -2.5, float32(math.Inf(1))}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bfloat16 element %d: %v, want %v", i, got[i], want[i])
		}
	}
	// float16 keeps 11 significand bits: 1 + 2^-11 ties to 1; 65520 rounds
	// to +Inf (beyond the largest half, 65504).
	in = FromSlice([]float32{1 + 1.0/2048, 1 + 3.0/2048, 65520, 6e-8}, 2, 2)
	h := ToHalf(in, Float16)
	if h.Shape()[0] != 2 || h.Shape()[1] != 2 {
		t.Fatalf("shape %v", h.Shape())
	}
	got = h.Float32().Data()
	want = []float32{1, 1 + 4.0/2048, float32(math.Inf(1)), float32(math.Ldexp(1, -24))}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("float16 element %d: %v, want %v", i, got[i], want[i])
		}
	}
}
