package kernels

import (
	"math"
	"testing"
)

// ulpDiff returns |got − want| in units of float32's ulp at want.
func ulpDiff(got float32, want float64) float64 {
	w := float32(want)
	ulp := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
	return math.Abs(float64(got)-want) / ulp
}

func TestExpCoreAccuracy(t *testing.T) {
	worst, at := 0.0, float32(0)
	for x := float32(expMin); x <= expMax; x += 1.0 / 4096 {
		for _, v := range []float32{x, math.Nextafter32(x, 0)} {
			if d := ulpDiff(expCore(v), math.Exp(float64(v))); d > worst {
				worst, at = d, v
			}
		}
	}
	if worst > 1.25 {
		t.Errorf("expCore: worst error %.2f ulp at x = %v, want ≤ 1.25", worst, at)
	}
	t.Logf("expCore worst error %.3f ulp at %v", worst, at)
}

func TestExpfSpecials(t *testing.T) {
	for _, x := range []float32{float32(math.Inf(-1)), -200, -103.9, -100, -87.5, -87, 0, 1e-30, 88, 88.5, 88.72, 89, 1000, float32(math.Inf(1))} {
		want := float32(math.Exp(float64(x)))
		if got := expf(x); got != want && ulpDiff(got, math.Exp(float64(x))) > 2 {
			t.Errorf("expf(%v) = %v, want %v", x, got, want)
		}
	}
	if got := expf(float32(math.NaN())); got == got {
		t.Errorf("expf(NaN) = %v, want NaN", got)
	}
	// The loop helpers follow expf: −Inf gives exactly 0, subnormal results are kept, NaN
	// propagates.
	dst := make([]float32, 5)
	x := []float32{float32(math.Inf(-1)), -90, 0, 1, float32(math.NaN())}
	s := expAffine(dst, x, 1, 0, 1)
	if dst[0] != 0 || dst[1] != float32(math.Exp(-90)) || dst[2] != 1 || dst[3] != expf(1) || dst[4] == dst[4] {
		t.Errorf("expAffine(%v) = %v", x, dst)
	}
	if !math.IsNaN(s) || !math.IsNaN(sumExpAffine(x, 1, 0)) {
		t.Errorf("sums over a NaN: %v, %v, want NaN", s, sumExpAffine(x, 1, 0))
	}
	if s, want := sumExpAffine(x[:4], 1, 0), float64(dst[1])+1+float64(dst[3]); s != want {
		t.Errorf("sumExpAffine = %v, want %v", s, want)
	}
	// Odd lengths take the tail path: same values.
	odd := make([]float32, 3)
	expAffine(odd, x[1:4], 1, 0, 2)
	if odd[0] != 2*dst[1] || odd[1] != 2 || odd[2] != 2*dst[3] {
		t.Errorf("expAffine with m = 2 over %v = %v", x[1:4], odd)
	}
}
