package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// refAdam is Adam/AdamW in float64 as Kingma and Ba's Algorithm 1 writes it (with bias-
// corrected moments m̂, v̂) plus the two weight-decay variants.
func refAdam(p, m, v, g []float64, lr, b1, b2, eps, wd float64, step int, decoupled bool) {
	bc1, bc2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
	for i := range p {
		gi := g[i]
		if !decoupled {
			gi += wd * p[i]
		} else {
			p[i] *= 1 - lr*wd
		}
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		mh, vh := m[i]/bc1, v[i]/bc2
		p[i] -= lr * mh / (math.Sqrt(vh) + eps)
	}
}

func TestAdamMatchesFloat64Reference(t *testing.T) {
	g := rng.New(21)
	n := 300
	for _, decoupled := range []bool{false, true} {
		h := AdamHyper{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05, Decoupled: decoupled}
		p := normal(g, n, 0, 1)
		p64 := to64(p)
		m, v := make([]float32, n), make([]float32, n)
		m64, v64 := make([]float64, n), make([]float64, n)
		for step := 1; step <= 10; step++ {
			grad := normal(g, n, 0, 1)
			h.Step = step
			gc := clone(grad)
			AdamStep(p, grad, m, v, h)
			for i := range grad {
				if grad[i] != gc[i] {
					t.Fatal("AdamStep modified grad")
				}
			}
			refAdam(p64, m64, v64, to64(grad), 1e-2, 0.9, 0.999, 1e-8, 0.05, step, decoupled)
		}
		// Ten float32 steps: each rounds p (ulp ≈ 6e-8 at 1) and the update (≈ 1e-2 · 2^-23).
		checkClose(t, "param", p, p64, 1e-6, 1e-6)
		checkClose(t, "exp_avg", m, m64, 1e-5, 1e-7)
		checkClose(t, "exp_avg_sq", v, v64, 1e-5, 1e-9)
	}
}

func TestAdamFirstStepIsSignStep(t *testing.T) {
	// With m = v = 0, step 1 gives m̂ = g and v̂ = g², so the update is lr·g/(|g| + eps).
	p := []float32{1, 1, 1, 1}
	grad := []float32{3, -0.5, 1e-3, -1e-12}
	m, v := make([]float32, 4), make([]float32, 4)
	AdamStep(p, grad, m, v, AdamHyper{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1})
	for i, gi := range grad {
		g := float64(gi)
		want := 1 - 0.1*g/(math.Abs(g)+1e-8)
		if math.Abs(float64(p[i])-want) > 1e-6 {
			t.Errorf("grad %v: param %v, want %v", g, p[i], want)
		}
	}
}

func TestAdamWDecaysWithZeroGradient(t *testing.T) {
	p := []float32{2, -4}
	m, v := make([]float32, 2), make([]float32, 2)
	AdamStep(p, []float32{0, 0}, m, v, AdamHyper{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5, Step: 1, Decoupled: true})
	if want := float32(1 - 0.1*0.5); p[0] != 2*want || p[1] != -4*want {
		t.Errorf("params %v, want %v", p, []float32{2 * want, -4 * want})
	}
}

func TestAdamPanics(t *testing.T) {
	mustPanic(t, "Step = 0", func() {
		AdamStep(make([]float32, 1), make([]float32, 1), make([]float32, 1), make([]float32, 1), AdamHyper{})
	})
	mustPanic(t, "len(expAvgSq)", func() {
		AdamStep(make([]float32, 2), make([]float32, 2), make([]float32, 2), make([]float32, 1), AdamHyper{Step: 1})
	})
}

func TestClipScale(t *testing.T) {
	for _, c := range []struct{ total, max, want float64 }{
		{10, 1, 1 / (10 + 1e-6)},
		{0.5, 1, 1},
		{1, 1, 1 / (1 + 1e-6)},
		{0, 1, 1},
		{math.Inf(1), 1, 0},
	} {
		if got := ClipScale(c.total, c.max); got != float32(c.want) {
			t.Errorf("ClipScale(%v, %v) = %v, want %v", c.total, c.max, got, float32(c.want))
		}
	}
	if got := ClipScale(math.NaN(), 1); got == got {
		t.Errorf("ClipScale(NaN) = %v, want NaN", got)
	}
}

func TestWidenTakesDecimalValues(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want float64
	}{{0.9, 0.9}, {0.999, 0.999}, {1e-3, 1e-3}, {1e-8, 1e-8}, {0.5, 0.5}, {0, 0}, {3e-4, 3e-4}} {
		if got := widen(c.f); got != c.want {
			t.Errorf("widen(%v) = %v, want %v", c.f, got, c.want)
		}
	}
	if !math.IsInf(widen(float32(math.Inf(1))), 1) || !math.IsNaN(widen(float32(math.NaN()))) {
		t.Error("widen does not pass ±Inf/NaN through")
	}
}
