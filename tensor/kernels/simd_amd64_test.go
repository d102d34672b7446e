//go:build goexperiment.simd && amd64

package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// The vector paths against the scalar loops, on random values of several scales, the special
// values, and values on both sides of every range the vector code tests (the exponential's
// [expMin, expMax] and expZero, GELU's x ≈ −10 and x ≈ 17), for every length from 0 to 40 and
// some longer ones (tails shorter than 8 and 16 lanes) at unaligned offsets. Each width the
// CPU supports runs: AVX2 (8 lanes) and, where present, AVX-512 (16 lanes).
//
// Bounds: elementwise results and ColumnSumInto must equal the scalar loops' bit for bit
// (0 ulp; any NaN matches any NaN). Float64 sums must equal, bit for bit, the eight-lane sum
// the vector paths define (laneSum below, written out in scalar code), and differ from the
// scalar loops' two- or four-lane sums by at most 2·len·2^-53 of the sum of magnitudes (the
// bound on either order's rounding error).

// simdLengths are the slice lengths checked: every length up to 40, then tails around
// multiples of 8 and 16.
func simdLengths() []int {
	var ns []int
	for n := 0; n <= 40; n++ {
		ns = append(ns, n)
	}
	return append(ns, 63, 64, 65, 127, 129, 255, 1000, 1031)
}

// simdSpecials are the values the vector code must route like the scalar code.
func simdSpecials() []float32 {
	inf := float32(math.Inf(1))
	return []float32{
		float32(math.NaN()), inf, -inf, 0, float32(math.Copysign(0, -1)),
		1e30, -1e30, 3.4e38, -3.4e38, 1e-40, -1e-40, 1e-30, -1e-30,
		expMin, expMin - 0.5, expMin + 1e-5, expMax, expMax + 0.5, 88.72, 88.73, 89,
		expZero, expZero - 0.5, expZero + 0.5, -103.9, -120, -1000,
		17, 17.5, -10, -10.2, -10.5, -11, 1e19, -1e19, 1e20, -1e20,
	}
}

// simdValues returns n values: N(0, scale²) with probability 1 − 2p, a special value or
// uniform in [−130, 130] (across the exponential's range limits) each with probability p.
func simdValues(g *rng.RNG, n int, scale float64, p float64) []float32 {
	sp := simdSpecials()
	x := normal(g, n, 0, scale)
	for i := range x {
		switch u := g.Float64(); {
		case u < p:
			x[i] = sp[g.Uint64n(uint64(len(sp)))]
		case u < 2*p:
			x[i] = -130 + 260*g.Float32()
		}
	}
	return x
}

// simdCase is one input: a slice of the given length at an offset of a larger buffer (so the
// vectors are loaded unaligned), and a name for messages.
type simdCase struct {
	name string
	x    []float32
}

// simdCases returns inputs of every simdLength at offsets 0..2, with no, rare and frequent
// special values.
func simdCases(g *rng.RNG, scale float64) []simdCase {
	var cs []simdCase
	for _, p := range []float64{0, 0.01, 0.2} {
		for _, n := range simdLengths() {
			off := n % 3
			buf := simdValues(g, n+off, scale, p)
			cs = append(cs, simdCase{fmt.Sprintf("n=%d off=%d p=%g", n, off, p), buf[off:]})
		}
	}
	return cs
}

// sameBits fails t unless got and want have the same float32 bits (any NaN matches any NaN).
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: [%d] = %v (%#08x), scalar %v (%#08x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// sameBits64 is sameBits for float64 values.
func sameBits64(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range got {
		g, w := got[i], want[i]
		if math.Float64bits(g) != math.Float64bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: [%d] = %v, scalar %v", what, i, g, w)
		}
	}
}

// laneSum returns Σ_j f(j) for j < n in the vector paths' order: element j into lane j mod 8,
// lanes combined as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
func laneSum(n int, f func(j int) float64) float64 {
	var s [8]float64
	for j := 0; j < n; j++ {
		s[j%8] += f(j)
	}
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

// closeSums fails t unless two float64 sums of n terms whose magnitudes add up to abs differ
// by at most 2·n·2^-53·abs.
func closeSums(t *testing.T, what string, got, want float64, n int, abs float64) {
	t.Helper()
	if got == want || (got != got && want != want) {
		return
	}
	if d := math.Abs(got - want); !(d <= 2*float64(n)*0x1p-53*abs) {
		t.Fatalf("%s: %v, scalar %v: |diff| %.3g above 2·n·2^-53·Σ|terms| = %.3g", what, got, want, d, 2*float64(n)*0x1p-53*abs)
	}
}

// skipIfFused skips t when GOAMD64=v3 lets the compiler fuse the scalar loops' multiply-adds
// (the Go spec allows it): the scalar code then no longer has the bits the vector paths
// reproduce. The accuracy tests against float64 references and PyTorch still run.
func skipIfFused(t *testing.T) {
	t.Helper()
	if scalarMayFuse {
		t.Skip("GOAMD64=v3: the scalar loops may be compiled with fused multiply-adds, so they do not define the vector paths' bits")
	}
}

// simdWidths returns the vector widths this CPU runs, skipping t if there are none.
func simdWidths(t *testing.T) []int {
	t.Helper()
	var ws []int
	if hasAVX2() {
		ws = append(ws, 8)
	}
	if hasAVX512() {
		ws = append(ws, 16)
	}
	if len(ws) == 0 {
		t.Skip("the CPU has neither AVX2+FMA nor AVX-512: no vector paths to compare")
	}
	return ws
}

func TestSIMDExpMatchesScalar(t *testing.T) {
	skipIfFused(t)
	g := rng.New(101)
	params := []struct{ a, c, m float32 }{
		{1, 0, 1}, {0.125, 1.7, 1}, {1, 3.5, 0.25}, {-1, 3, -2}, {2, 0, 1},
		{1, -100, 1}, // every exponent above expMax: overflow to +Inf through the scalar path
		{1, 95, 1},   // exponents around expMin and expZero: subnormal and zero results
		{1, float32(math.NaN()), 1},
	}
	for _, w := range simdWidths(t) {
		for _, c := range simdCases(g, 4) {
			for _, p := range params {
				what := fmt.Sprintf("width %d, %s, a=%v c=%v m=%v", w, c.name, p.a, p.c, p.m)
				n := len(c.x)
				e := make([]float32, n) // the scalar exponentials
				var abs float64
				for j, v := range c.x {
					e[j] = expf(p.a*v - p.c)
					abs += math.Abs(float64(e[j]))
				}
				wantSum := laneSum(n, func(j int) float64 { return float64(e[j]) })
				wantDst := make([]float32, n)
				scalarSum := expAffineGo(wantDst, c.x, p.a, p.c, p.m)
				for j := range e {
					if d := p.m * e[j]; math.Float32bits(d) != math.Float32bits(wantDst[j]) && !(d != d && wantDst[j] != wantDst[j]) {
						t.Fatalf("%s: expAffineGo's dst[%d] = %v, m·expf = %v", what, j, wantDst[j], d)
					}
				}

				gotDst := make([]float32, n)
				var got, gotSum float64
				if w == 16 {
					got = expAffine16(gotDst, c.x, p.a, p.c, p.m, true)
					gotSum = expAffine16(nil, c.x, p.a, p.c, 0, false)
				} else {
					got = expAffine8(gotDst, c.x, p.a, p.c, p.m, true)
					gotSum = expAffine8(nil, c.x, p.a, p.c, 0, false)
				}
				sameBits(t, "expAffine dst, "+what, gotDst, wantDst)
				sameBits64(t, "expAffine sum, "+what, []float64{got, gotSum}, []float64{wantSum, wantSum})
				closeSums(t, "expAffine sum vs scalar, "+what, got, scalarSum, n, abs)
				closeSums(t, "sumExpAffine vs scalar, "+what, gotSum, sumExpAffineGo(c.x, p.a, p.c), n, abs)

				// In place (dst aliasing x), as the softmax uses it.
				in := clone(c.x)
				if w == 16 {
					expAffine16(in, in, p.a, p.c, p.m, true)
				} else {
					expAffine8(in, in, p.a, p.c, p.m, true)
				}
				sameBits(t, "expAffine in place, "+what, in, wantDst)

				var gotMax float32
				if w == 16 {
					gotMax = maxScaled16(c.x, p.a)
				} else {
					gotMax = maxScaled8(c.x, p.a)
				}
				sameBits(t, "maxScaled, "+what, []float32{gotMax}, []float32{maxScaledGo(c.x, p.a)})
			}
		}
	}
}

func TestSIMDMaxSignedZeros(t *testing.T) {
	// Go's max prefers +0 to −0 in any order; VMAXPS would return one operand by position.
	nz := float32(math.Copysign(0, -1))
	for _, w := range simdWidths(t) {
		for _, x := range [][]float32{
			{nz, 0, nz}, {0, nz}, {nz, nz, nz}, {-1, nz, -2, nz, nz, nz, nz, nz, nz, 0},
			{nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, nz, 0, nz},
		} {
			want := maxScaledGo(x, 1)
			got := maxScaled8(x, 1)
			if w == 16 {
				got = maxScaled16(x, 1)
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("width %d: max of %v = %v (bits %#x), scalar %v (bits %#x)", w, x, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}

// TestSIMDExpAccuracy repeats TestExpCoreAccuracy's sweep through the vector exponential: it
// must be expCore exactly (unless GOAMD64=v3 fuses expCore), and within 1.25 ulp of math.Exp.
func TestSIMDExpAccuracy(t *testing.T) {
	var x []float32
	for v := float32(expMin); v <= expMax; v += 1.0 / 512 {
		x = append(x, v, math.Nextafter32(v, 0))
	}
	for _, w := range simdWidths(t) {
		e := make([]float32, len(x))
		if w == 16 {
			expAffine16(e, x, 1, 0, 1, true)
		} else {
			expAffine8(e, x, 1, 0, 1, true)
		}
		worst := 0.0
		for i, v := range x {
			if !scalarMayFuse && e[i] != expCore(v) {
				t.Fatalf("width %d: exp(%v) = %v, expCore %v", w, v, e[i], expCore(v))
			}
			worst = math.Max(worst, ulpDiff(e[i], math.Exp(float64(v))))
		}
		if worst > 1.25 {
			t.Errorf("width %d: worst error %.3f ulp, want ≤ 1.25", w, worst)
		}
		t.Logf("width %d: worst error %.3f ulp vs math.Exp over %d arguments", w, worst, len(x))
	}
}

func TestSIMDGeluMatchesScalar(t *testing.T) {
	skipIfFused(t)
	g := rng.New(102)
	g8, g16 := vgelu8Consts, vgelu16Consts
	for _, w := range simdWidths(t) {
		for _, scale := range []float64{1, 6} {
			for _, c := range simdCases(g, scale) {
				n := len(c.x)
				what := fmt.Sprintf("width %d, scale %v, %s", w, scale, c.name)
				dy := simdValues(g, n, 1, 0.05)
				bias := simdValues(g, n, 2, 0.02)
				dbias0 := normal(g, n, 0, 1)
				for _, withBias := range []bool{false, true} {
					// The scalar reference: u = x + bias rounded, then the scalar loops; dbias
					// accumulates dx in float32.
					u, b, db := c.x, []float32(nil), []float32(nil)
					if withBias {
						u, b, db = make([]float32, n), bias, clone(dbias0)
						for j := range u {
							u[j] = c.x[j] + bias[j]
						}
					}
					wantY, wantDx := make([]float32, n), make([]float32, n)
					geluForwardGo(wantY, u)
					geluBackwardGo(wantDx, dy, u)
					y, dx := make([]float32, n), make([]float32, n)
					if w == 16 {
						geluForward16(g16(), y, c.x, b)
						geluBackward16(g16(), dx, dy, c.x, b, db)
					} else {
						geluForward8(g8(), y, c.x, b)
						geluBackward8(g8(), dx, dy, c.x, b, db)
					}
					what := fmt.Sprintf("%s, bias %v", what, withBias)
					sameBits(t, "gelu, "+what, y, wantY)
					sameBits(t, "gelu backward, "+what, dx, wantDx)
					if withBias {
						wantDb := clone(dbias0)
						for j := range wantDb {
							wantDb[j] += wantDx[j]
						}
						sameBits(t, "gelu dbias, "+what, db, wantDb)
					}
				}
			}
		}
	}
}

// TestSIMDBiasGeluMatchesUnfused checks the fused vector BiasGelu kernels against their
// definition by the unfused scalar pieces, with dx aliasing dy and x.
func TestSIMDBiasGeluMatchesUnfused(t *testing.T) {
	skipIfFused(t)
	simdWidths(t)
	g := rng.New(109)
	for _, sh := range []struct{ rows, cols int }{{1, 1}, {3, 7}, {4, 33}, {2, 300}, {5, 256}} {
		rows, cols := sh.rows, sh.cols
		x, bias := simdValues(g, rows*cols, 3, 0.02), normal(g, cols, 0, 1)
		dy, dbias0 := simdValues(g, rows*cols, 1, 0.02), normal(g, cols, 0, 1)
		wantY, wantDx, wantDb := make([]float32, rows*cols), make([]float32, rows*cols), clone(dbias0)
		for r := 0; r < rows; r++ {
			u := make([]float32, cols)
			for j := range u {
				u[j] = x[r*cols+j] + bias[j]
			}
			geluForwardGo(wantY[r*cols:(r+1)*cols], u)
			geluBackwardGo(wantDx[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], u)
			for j := range u {
				wantDb[j] += wantDx[r*cols+j]
			}
		}
		what := fmt.Sprintf("%d×%d", rows, cols)
		y := clone(x)
		BiasGeluForward(y, y, bias, rows, cols)
		sameBits(t, "BiasGeluForward in place, "+what, y, wantY)
		dx, db := clone(dy), clone(dbias0)
		BiasGeluBackward(dx, db, dx, x, bias, rows, cols)
		sameBits(t, "BiasGeluBackward dx aliasing dy, "+what, dx, wantDx)
		sameBits(t, "BiasGeluBackward dbias, "+what, db, wantDb)
		dx, db = clone(x), clone(dbias0)
		BiasGeluBackward(dx, db, dy, dx, bias, rows, cols)
		sameBits(t, "BiasGeluBackward dx aliasing x, "+what, dx, wantDx)
		sameBits(t, "BiasGeluBackward dbias, "+what, db, wantDb)
	}
}
