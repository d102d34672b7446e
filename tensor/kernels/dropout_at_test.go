package kernels

import (
	"math"
	"slices"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// TestDropoutAtSplits: a row drawn whole and drawn in pieces at their
// counters (odd and even starts, pieces of one element) gives the same mask
// and output; the mask is the definition's, element c kept iff half c&1 of
// SplitMix64(key + (c>>1)·φ) is at least round(p·2^32).
func TestDropoutAtSplits(t *testing.T) {
	const n, p, key = 1001, float32(0.3), uint64(12345)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) - 500.5
	}
	y, mask := make([]float32, n), make([]byte, n)
	DropoutAt(y, mask, x, p, key, 7)
	thresh := uint64(widen(p)*(1<<32) + 0.5)
	for i := range n {
		c := uint64(7 + i)
		u := rng.SplitMix64(key + (c>>1)*rng.Golden)
		half := u & 0xFFFFFFFF
		if c&1 == 1 {
			half = u >> 32
		}
		if want := half >= thresh; (mask[i] == 1) != want {
			t.Fatalf("element %d: mask %d, the definition keeps it: %v", i, mask[i], want)
		}
	}
	for _, cuts := range [][]int{{1}, {2, 3, 4}, {500, 501}, {10, 999, 1000}} {
		py, pm := make([]float32, n), make([]byte, n)
		start := 0
		for _, end := range append(cuts, n) {
			DropoutAt(py[start:end], pm[start:end], x[start:end], p, key, uint64(7+start))
			start = end
		}
		if !slices.Equal(pm, mask) || !slices.Equal(py, y) {
			t.Fatalf("cut at %v: the pieces differ from the whole row", cuts)
		}
	}
	other := make([]byte, n)
	DropoutAt(make([]float32, n), other, x, p, rng.Derive(key, 1), 7)
	if slices.Equal(other, mask) {
		t.Fatal("another key drew the same mask")
	}
}

// TestDropoutAtRate: the kept fraction is 1 − p within six standard
// deviations, kept elements are scaled by 1/(1 − p), and p = 0 and 1 are
// Dropout's.
func TestDropoutAtRate(t *testing.T) {
	const n = 1 << 20
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	for _, p := range []float32{0.1, 0.5, 0.9} {
		y, mask := make([]float32, n), make([]byte, n)
		DropoutAt(y, mask, x, p, rng.Derive(99, uint64(p*10)), 0)
		kept := 0
		for i, m := range mask {
			kept += int(m)
			if want := float32(m) * dropoutScale(widen(p)); y[i] != want {
				t.Fatalf("p %g: y[%d] = %g, want %g", p, i, y[i], want)
			}
		}
		q := float64(1 - widen(p))
		if sd := math.Sqrt(n * q * (1 - q)); math.Abs(float64(kept)-n*q) > 6*sd {
			t.Errorf("p %g: kept %d of %d, want %.0f ± %.0f", p, kept, n, n*q, 6*sd)
		}
	}
	for _, p := range []float32{0, 1} {
		y, mask := make([]float32, 4), make([]byte, 4)
		DropoutAt(y, mask, []float32{1, 2, 3, 4}, p, 5, 3)
		want := []float32{1, 2, 3, 4}
		if p == 1 {
			want = []float32{0, 0, 0, 0}
		}
		if !slices.Equal(y, want) {
			t.Errorf("p %g: %v, want %v", p, y, want)
		}
	}
}
