package rng

import (
	"math"
	"testing"
)

// The published xoshiro256** outputs from the state {1, 2, 3, 4}, as produced by the
// authors' reference C implementation (the same vector is checked by Rust's rand_xoshiro).
func TestXoshiroReferenceVector(t *testing.T) {
	var r RNG
	r.SetState(State{1, 2, 3, 4})
	want := []uint64{11520, 0, 1509978240, 1215971899390074240, 1216172134540287360,
		607988272756665600, 16172922978634559625, 8476171486693032832,
		10595114339597558777, 2904607092377533576}
	for i, w := range want {
		if got := r.Uint64(); got != w {
			t.Fatalf("output %d = %d, want %d", i, got, w)
		}
	}
}

// The reference splitmix64.c outputs for seeds 0 and 1234567.
func TestSplitMix64ReferenceVector(t *testing.T) {
	for _, tc := range []struct {
		seed uint64
		want []uint64
	}{
		{0, []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC}},
		{1234567, []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423,
			4593380528125082431, 16408922859458223821}},
	} {
		for i, w := range tc.want {
			if got := SplitMix64(tc.seed + uint64(i)*golden); got != w {
				t.Errorf("seed %d output %d = %#x, want %#x", tc.seed, i, got, w)
			}
		}
	}
}

func TestNewSeedsFromSplitMix(t *testing.T) {
	r := New(1234567)
	want := State{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431}
	if r.State() != want {
		t.Fatalf("New(1234567).State() = %v, want %v", r.State(), want)
	}
}

func TestDeterminismAndDistinctSeeds(t *testing.T) {
	a, b, c := New(42), New(42), New(43)
	differ := false
	for i := 0; i < 1000; i++ {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		if x != y {
			t.Fatalf("draw %d: same seed gave %d and %d", i, x, y)
		}
		if x != z {
			differ = true
		}
	}
	if !differ {
		t.Fatal("seeds 42 and 43 gave identical streams")
	}
}

func TestStateSaveRestoreReplays(t *testing.T) {
	r := New(7)
	r.Uint64()
	r.NormFloat64()
	saved := r.State()
	var first [64]float32
	r.FillNormal(first[:], 0, 1)
	f1, u1, n1 := r.Float32(), r.Uint64(), r.NormFloat64()

	// Restore into the same generator and into a fresh copy: both replay.
	for _, g := range []*RNG{r, {}} {
		g.SetState(saved)
		var again [64]float32
		g.FillNormal(again[:], 0, 1)
		if again != first {
			t.Fatal("FillNormal after SetState differs")
		}
		if f, u, n := g.Float32(), g.Uint64(), g.NormFloat64(); f != f1 || u != u1 || n != n1 {
			t.Fatalf("replay (%v, %v, %v) != (%v, %v, %v)", f, u, n, f1, u1, n1)
		}
	}
	// A copied value is an independent generator.
	c := *r
	if c.Uint64() != r.Uint64() {
		t.Fatal("copied generator diverged")
	}
}

func TestSetStateZeroPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("SetState(zero) did not panic")
		}
	}()
	var r RNG
	r.SetState(State{})
}

func TestFloatRanges(t *testing.T) {
	r := New(3)
	for i := 0; i < 200000; i++ {
		if f := r.Float32(); !(f >= 0 && f < 1) {
			t.Fatalf("Float32 = %v outside [0,1)", f)
		}
		if f := r.Float64(); !(f >= 0 && f < 1) {
			t.Fatalf("Float64 = %v outside [0,1)", f)
		}
	}
	// The largest outputs map strictly below 1.
	if f := float32(uint64(math.MaxUint64)>>40) * (1.0 / (1 << 24)); f >= 1 {
		t.Fatalf("largest Float32 %v is not below 1", f)
	}
	if f := float64(uint64(math.MaxUint64)>>11) * (1.0 / (1 << 53)); f >= 1 {
		t.Fatalf("largest Float64 %v is not below 1", f)
	}
}

// Uniform moments: mean 1/2, variance 1/12, within 5 standard errors.
func TestUniformMoments(t *testing.T) {
	const n = 1000000
	r := New(11)
	var s, s2 float64
	for i := 0; i < n; i++ {
		x := float64(r.Float32())
		s += x
		s2 += x * x
	}
	mean := s / n
	variance := s2/n - mean*mean
	if se := math.Sqrt(1.0 / 12 / n); math.Abs(mean-0.5) > 5*se {
		t.Errorf("uniform mean %v, want 0.5 ± %v", mean, 5*se)
	}
	// Var of (x-1/2)^2 for U(0,1) is 1/180.
	if se := math.Sqrt(1.0 / 180 / n); math.Abs(variance-1.0/12) > 5*se {
		t.Errorf("uniform variance %v, want 1/12 ± %v", variance, 5*se)
	}
}

func TestUint64n(t *testing.T) {
	r := New(5)
	const n, draws = 10, 100000
	var counts [n]int
	for i := 0; i < draws; i++ {
		v := r.Uint64n(n)
		if v >= n {
			t.Fatalf("Uint64n(%d) = %d", n, v)
		}
		counts[v]++
	}
	// Each count is Binomial(draws, 1/n): 5 sigma.
	p := 1.0 / n
	sd := math.Sqrt(draws * p * (1 - p))
	for k, c := range counts {
		if math.Abs(float64(c)-draws*p) > 5*sd {
			t.Errorf("value %d drawn %d times, want %v ± %v", k, c, draws*p, 5*sd)
		}
	}
}

// normalMoments checks mean, variance, skewness and kurtosis of n standard normals against
// their sampling distributions at 5 sigma: se(mean)=1/√n, se(var)=√(2/n), se(skew)≈√(6/n),
// se(kurt)≈√(24/n).
func normalMoments(t *testing.T, name string, z []float64) {
	t.Helper()
	n := float64(len(z))
	var m1, m2, m3, m4 float64
	for _, x := range z {
		m1 += x
		m2 += x * x
		m3 += x * x * x
		m4 += x * x * x * x
	}
	m1, m2, m3, m4 = m1/n, m2/n, m3/n, m4/n
	check := func(what string, got, want, se float64) {
		if math.Abs(got-want) > 5*se {
			t.Errorf("%s: %s = %v, want %v ± %v (5σ)", name, what, got, want, 5*se)
		}
	}
	check("mean", m1, 0, 1/math.Sqrt(n))
	check("E[z²]", m2, 1, math.Sqrt(2/n))
	check("E[z³]", m3, 0, math.Sqrt(15/n))
	check("E[z⁴]", m4, 3, math.Sqrt(96/n))
	// Tail mass beyond 3: P(|z|>3) = 0.0026998, binomial standard error.
	var tail float64
	for _, x := range z {
		if math.Abs(x) > 3 {
			tail++
		}
	}
	p := math.Erfc(3 / math.Sqrt2)
	check("P(|z|>3)", tail/n, p, math.Sqrt(p*(1-p)/n))
}

func TestNormFloat64Moments(t *testing.T) {
	const n = 1000000
	r := New(2024)
	z := make([]float64, n)
	for i := range z {
		z[i] = r.NormFloat64()
	}
	normalMoments(t, "NormFloat64", z)
}

func TestFillNormalMomentsAndScale(t *testing.T) {
	const n = 1000001 // odd: exercises the tail element
	r := New(99)
	buf := make([]float32, n)
	const mean, std = 0.5, 0.02
	r.FillNormal(buf, mean, std)
	z := make([]float64, n)
	for i, v := range buf {
		z[i] = (float64(v) - mean) / std
	}
	normalMoments(t, "FillNormal", z)

	// FillNormal's first value is NormFloat64's, and the stream advances by 2 per pair.
	a, b := New(1), New(1)
	var two [3]float32
	a.FillNormal(two[:], 0, 1)
	if want := float32(b.NormFloat64()); two[0] != want {
		t.Errorf("FillNormal[0] = %v, NormFloat64 = %v", two[0], want)
	}
	b.Uint64() // NormFloat64 took the first pair; skip the second
	b.Uint64()
	if a.State() != b.State() {
		t.Error("FillNormal of 3 values did not consume exactly 4 Uint64 values")
	}
}

func BenchmarkUint64(b *testing.B) {
	r := New(1)
	var s uint64
	for i := 0; i < b.N; i++ {
		s += r.Uint64()
	}
	_ = s
}

func BenchmarkFillNormal(b *testing.B) {
	r := New(1)
	buf := make([]float32, 1<<16)
	b.SetBytes(int64(4 * len(buf)))
	for i := 0; i < b.N; i++ {
		r.FillNormal(buf, 0, 0.02)
	}
}

func TestSkipNormalMatchesFillNormal(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 64} {
		a, b := New(99), New(99)
		skipped := make([]float32, n)
		a.FillNormal(skipped, 0, 1)
		b.SkipNormal(n)
		x, y := make([]float32, 5), make([]float32, 5)
		a.FillNormal(x, 0, 1)
		b.FillNormal(y, 0, 1)
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("n=%d: after SkipNormal the stream differs from after FillNormal at %d: %v vs %v", n, i, y[i], x[i])
			}
		}
	}
}

// TestDeriveDistinct: the sub-stream keys of 100 keys × 100 values are all
// distinct, and differ from their parents.
func TestDeriveDistinct(t *testing.T) {
	seen := map[uint64]bool{}
	for k := range uint64(100) {
		for v := range uint64(100) {
			d := Derive(k, v)
			if seen[d] || d == k {
				t.Fatalf("Derive(%d, %d) = %#x, seen before or its parent", k, v, d)
			}
			seen[d] = true
		}
	}
}
