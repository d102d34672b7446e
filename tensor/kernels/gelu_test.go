package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

const refK0 = 0.7978845608028654 // √(2/π)

// onePlusTanh returns 1 + tanh(u) in float64 without cancellation: directly where
// tanh(u) > −0.46, else by the exact identity 1 + tanh(u) = 2·e^(2u)/(1 + e^(2u)).
func onePlusTanh(u float64) float64 {
	if u > -0.5 {
		return 1 + math.Tanh(u)
	}
	e := math.Exp(2 * u)
	return 2 * e / (1 + e)
}

// refGelu is gelu's definition, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func refGelu(x float64) float64 {
	return 0.5 * x * onePlusTanh(refK0*(x+0.044715*x*x*x))
}

// refGeluGrad differentiates the definition by the product and chain rules, with
// 1 − tanh² = (1 − tanh)·(1 + tanh).
func refGeluGrad(x float64) float64 {
	u := refK0 * (x + 0.044715*x*x*x)
	opt := onePlusTanh(u)
	return 0.5*opt + 0.5*x*(2-opt)*opt*refK0*(1+3*0.044715*x*x)
}

// geluInputs covers the interesting range densely plus tails and specials.
func geluInputs(g *rng.RNG) []float32 {
	x := uniform(g, 40000, -12, 20)
	x = append(x, normal(g, 40000, 0, 1)...)
	x = append(x, 0, float32(math.Copysign(0, -1)), 1e-20, -1e-20, 30, -30, 100, -100, 1e6, -1e6)
	return x
}

// tinyGelu reports whether x is where GeluBackward flushes gelu' to 0 (−2u > 88), checking
// that the reference values there are indeed below 1e-35.
func tinyGelu(t *testing.T, x float64) bool {
	z := 2 * refK0 * (x + 0.044715*x*x*x)
	if -z <= 88 {
		return false
	}
	if g, d := refGelu(x), refGeluGrad(x); math.Abs(g) > 1e-35 || math.Abs(d) > 1e-35 {
		t.Fatalf("at x = %v the flushed values are not tiny: gelu %v, gelu' %v", x, g, d)
	}
	return true
}

// geluTol returns the error bounds for gelu and gelu' at x, as multiples of 2^-22 (two
// float32 ulps): the kernel's −2u carries a relative rounding error of a few 2^-24, which
// moves σ by |2u|·(1−σ) times that, and each result is a few roundings of terms of size
// |gelu| (forward) or s·(1 + |2x·(1−s)·u'|) (backward, whose terms cancel near x ≈ −0.75).
func geluTol(x float64) (fwd, bwd float64) {
	u := refK0 * (x + 0.044715*x*x*x)
	s := onePlusTanh(u) / 2
	oms := onePlusTanh(-u) / 2 // 1 − s without cancellation
	amp := 0x1p-22 * (1 + 2*math.Abs(u)*oms)
	terms := s * (1 + math.Abs(2*x*oms*refK0*(1+3*0.044715*x*x)))
	return amp * math.Abs(refGelu(x)), amp * terms
}

func TestGeluForwardMatchesReference(t *testing.T) {
	x := geluInputs(rng.New(5))
	y := make([]float32, len(x))
	GeluForward(y, x)
	for i, v := range x {
		want := refGelu(float64(v))
		// Past x ≈ −10.1 the kernel's e^(−2u) overflows and gelu underflows to −0; the true
		// values there are below 1e-37.
		if tol, _ := geluTol(float64(v)); math.Abs(float64(y[i])-want) > tol+1e-37 {
			t.Errorf("gelu(%v) = %v, want %v", v, y[i], want)
		}
	}
	// In place.
	xc := clone(x)
	GeluForward(xc, xc)
	checkClose(t, "gelu in place", xc, to64(y), 0, 0)
	// Specials.
	sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	out := make([]float32, 3)
	GeluForward(out, sp)
	if out[0] == out[0] || !math.IsInf(float64(out[1]), 1) || out[2] == out[2] {
		t.Errorf("gelu(NaN, +Inf, −Inf) = %v, want NaN, +Inf, NaN (as 0.5·x·(1+tanh u))", out)
	}
}

func TestGeluBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	x := to64(uniform(rng.New(6), 200, -6, 6))
	for _, v := range x {
		fd := (refGelu(v+1e-6) - refGelu(v-1e-6)) / 2e-6
		if d := math.Abs(fd - refGeluGrad(v)); d > 1e-8 {
			t.Fatalf("gelu'(%v): reference %v, finite differences %v", v, refGeluGrad(v), fd)
		}
	}
}

func TestGeluBackwardMatchesReference(t *testing.T) {
	g := rng.New(7)
	x := geluInputs(g)
	dy := normal(g, len(x), 0, 1)
	dx := make([]float32, len(x))
	GeluBackward(dx, dy, x)
	for i, v := range x {
		want := float64(dy[i]) * refGeluGrad(float64(v))
		if tinyGelu(t, float64(v)) {
			if dx[i] != 0 {
				t.Errorf("dy·gelu'(%v) = %v, want 0 (true value %v)", v, dx[i], want)
			}
			continue
		}
		if _, tol := geluTol(float64(v)); math.Abs(float64(dx[i])-want) > tol*math.Abs(float64(dy[i]))+1e-38 {
			t.Errorf("dy·gelu'(%v) = %v, want %v", v, dx[i], want)
		}
	}
	// dx aliasing dy, and aliasing x.
	a := clone(dy)
	GeluBackward(a, a, x)
	checkClose(t, "dx aliasing dy", a, to64(dx), 0, 0)
	b := clone(x)
	GeluBackward(b, dy, b)
	checkClose(t, "dx aliasing x", b, to64(dx), 0, 0)
}

func TestBiasGelu(t *testing.T) {
	g := rng.New(8)
	rows, cols := 7, 33
	x := normal(g, rows*cols, 0, 2)
	bias := normal(g, cols, 0, 1)
	dy := normal(g, rows*cols, 0, 1)

	// Reference: u = float32(x + b) as an unfused add would round it, then the float64 gelu.
	y := make([]float32, rows*cols)
	BiasGeluForward(y, x, bias, rows, cols)
	wantY, wantDx := make([]float64, rows*cols), make([]float64, rows*cols)
	dbias0 := normal(g, cols, 0, 1)
	wantDb := to64(dbias0)
	for r := 0; r < rows; r++ {
		for j := 0; j < cols; j++ {
			u := float64(x[r*cols+j] + bias[j])
			wantY[r*cols+j] = refGelu(u)
			wantDx[r*cols+j] = float64(dy[r*cols+j]) * refGeluGrad(u)
			wantDb[j] += wantDx[r*cols+j]
		}
	}
	checkClose(t, "bias-gelu y", y, wantY, 1e-5, 1e-7)

	dx, dbias := make([]float32, rows*cols), clone(dbias0)
	BiasGeluBackward(dx, dbias, dy, x, bias, rows, cols)
	checkClose(t, "bias-gelu dx", dx, wantDx, 1e-5, 1e-6)
	checkClose(t, "bias-gelu dbias", dbias, wantDb, 1e-5, 1e-5)

	// The fused kernels equal the unfused ones bit for bit.
	u := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		Add(u[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], bias)
	}
	y2, dx2 := make([]float32, rows*cols), make([]float32, rows*cols)
	GeluForward(y2, u)
	GeluBackward(dx2, dy, u)
	checkClose(t, "fused vs unfused y", y, to64(y2), 0, 0)
	checkClose(t, "fused vs unfused dx", dx, to64(dx2), 0, 0)

	// Aliasing: y over x; dx over dy; dx over x.
	xc := clone(x)
	BiasGeluForward(xc, xc, bias, rows, cols)
	checkClose(t, "y aliasing x", xc, to64(y), 0, 0)
	for name, alias := range map[string][]float32{"dy": clone(dy), "x": clone(x)} {
		db := clone(dbias0)
		if name == "dy" {
			BiasGeluBackward(alias, db, alias, x, bias, rows, cols)
		} else {
			BiasGeluBackward(alias, db, dy, alias, bias, rows, cols)
		}
		checkClose(t, "dx aliasing "+name, alias, to64(dx), 0, 0)
		checkClose(t, "dbias with dx aliasing "+name, db, to64(dbias), 0, 0)
	}
}

func TestBiasGeluBackwardFiniteDifferences(t *testing.T) {
	// d/dbias of Σ dy ⊙ gelu(x + bias), in float64 on the reference, against the kernel.
	g := rng.New(9)
	rows, cols := 3, 4
	x, bias, dy := normal(g, rows*cols, 0, 1), normal(g, cols, 0, 1), normal(g, rows*cols, 0, 1)
	loss := func(b []float64) float64 {
		var s float64
		for r := 0; r < rows; r++ {
			for j := 0; j < cols; j++ {
				s += float64(dy[r*cols+j]) * refGelu(float64(x[r*cols+j])+b[j])
			}
		}
		return s
	}
	fd := centralDiff(loss, to64(bias), 1e-6)
	dx, db := make([]float32, rows*cols), make([]float32, cols)
	BiasGeluBackward(dx, db, dy, x, bias, rows, cols)
	checkClose(t, "dbias vs FD", db, fd, 1e-5, 1e-6)
}
