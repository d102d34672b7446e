package kernels

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// uniform returns n values uniform in [lo, hi).
func uniform(g *rng.RNG, n int, lo, hi float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*g.Float32()
	}
	return x
}

// normal returns n values ~ N(mean, std²).
func normal(g *rng.RNG, n int, mean, std float64) []float32 {
	x := make([]float32, n)
	g.FillNormal(x, mean, std)
	return x
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// checkClose fails t unless |got[i] − want[i]| ≤ atol + rtol·|want[i]| for every i, and
// reports the worst violation.
func checkClose(t *testing.T, what string, got []float32, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	worst, at, bad := 0.0, -1, 0
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(w) != math.IsNaN(g) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, g, w)
		}
		if math.IsNaN(w) || g == w {
			continue
		}
		excess := math.Abs(g-w) / (atol + rtol*math.Abs(w))
		if excess > 1 {
			bad++
		}
		if excess > worst {
			worst, at = excess, i
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values out of tolerance (rtol %g, atol %g); worst [%d] = %v, want %v (%.3g× the tolerance)",
			what, bad, len(got), rtol, atol, at, got[at], want[at], worst)
	}
}

// checkClose64 is checkClose for two float64 slices (reference against finite differences).
func checkClose64(t *testing.T, what string, got, want []float64, rtol, atol float64) {
	t.Helper()
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > atol+rtol*math.Abs(want[i]) {
			t.Errorf("%s[%d] = %v, want %v (|diff| %.3g > %.3g)", what, i, got[i], want[i], d, atol+rtol*math.Abs(want[i]))
			return
		}
	}
}

// centralDiff returns the gradient of f at x by central differences with step h·max(1,|x_i|):
// (f(x + h e_i) − f(x − h e_i)) / 2h, all in float64. x is restored on return.
func centralDiff(f func(x []float64) float64, x []float64, h float64) []float64 {
	grad := make([]float64, len(x))
	for i := range x {
		xi := x[i]
		step := h * math.Max(1, math.Abs(xi))
		x[i] = xi + step
		fp := f(x)
		x[i] = xi - step
		fm := f(x)
		x[i] = xi
		grad[i] = (fp - fm) / (2 * step)
	}
	return grad
}

// dot64 returns Σ a[i]·b[i].
func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// mustPanic fails t unless fn panics with a message containing want.
func mustPanic(t *testing.T, want string, fn func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one mentioning %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q does not mention %q", msg, want)
		}
	}()
	fn()
}
