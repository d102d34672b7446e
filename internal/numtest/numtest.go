// Package numtest holds the float comparisons gotron's tests share: bitwise
// equality where the order of arithmetic is the same, and the relative
// norm of a difference where it is not.
package numtest

import (
	"math"
	"testing"
)

// SameBits fails t unless got and want are identical bit for bit.
func SameBits(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: lengths %d and %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d is %v, want %v (bitwise)", what, i, got[i], want[i])
		}
	}
}

// RelNorm returns ‖got − want‖ / ‖want‖ (Euclidean norms, in float64), or
// ‖got − want‖ when want is zero. got and want must have equal lengths.
func RelNorm(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		d += e * e
		n += float64(want[i]) * float64(want[i])
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// CloseNorm fails t unless RelNorm(got, want) ≤ tol.
func CloseNorm(t testing.TB, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: lengths %d and %d", what, len(got), len(want))
	}
	if r := RelNorm(got, want); r > tol || math.IsNaN(r) {
		t.Fatalf("%s: relative difference %.3g > %.3g", what, r, tol)
	}
}
