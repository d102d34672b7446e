//go:build goexperiment.simd && amd64

package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// The remaining kernels have only the 8-lane path, which the hooks take on any CPU with AVX2;
// the scalar reference is the scalar loop's expression, written out.

func TestSIMDElementwiseMatchesScalar(t *testing.T) {
	simdWidths(t)
	g := rng.New(103)
	for _, c := range simdCases(g, 3) {
		x, n := c.x, len(c.x)
		a, b := simdValues(g, n, 2, 0.05), simdValues(g, n, 2, 0.05)
		want := make([]float32, n)

		for i := range want {
			want[i] = a[i] + b[i]
		}
		got := make([]float32, n)
		Add(got, a, b)
		sameBits(t, "Add, "+c.name, got, want)
		got = clone(a)
		AddInto(got, b)
		sameBits(t, "AddInto, "+c.name, got, want)

		for i := range want {
			want[i] = x[i] * -0.37
		}
		got = clone(x)
		Scale(got, -0.37)
		sameBits(t, "Scale, "+c.name, got, want)

		var abs float64
		for _, v := range x {
			abs += float64(v) * float64(v)
		}
		ss := laneSum(n, func(j int) float64 { return float64(x[j]) * float64(x[j]) })
		sameBits64(t, "SumSquares, "+c.name, []float64{SumSquares(x)}, []float64{ss})
		closeSums(t, "SumSquares vs a sequential sum, "+c.name, SumSquares(x), abs, n, abs)
	}
}

func TestSIMDAxpyMatchesScalar(t *testing.T) {
	skipIfFused(t) // dst + alpha·x may be fused in the scalar loop under GOAMD64=v3
	simdWidths(t)
	g := rng.New(108)
	for _, c := range simdCases(g, 3) {
		a := simdValues(g, len(c.x), 2, 0.05)
		want := make([]float32, len(a))
		for i := range want {
			want[i] = a[i] + 1.3e-3*c.x[i]
		}
		Axpy(a, 1.3e-3, c.x)
		sameBits(t, "Axpy, "+c.name, a, want)
	}
}

func TestSIMDColumnSumMatchesScalar(t *testing.T) {
	simdWidths(t)
	g := rng.New(104)
	for _, sh := range []struct{ rows, cols int }{{0, 300}, {3, 7}, {5, 300}, {4, 513}, {9, 16}} {
		x := simdValues(g, sh.rows*sh.cols, 1, 0.01)
		d0 := normal(g, sh.cols, 0, 1)
		want := clone(d0)
		for j := range want {
			var s float64
			for r := 0; r < sh.rows; r++ {
				s += float64(x[r*sh.cols+j])
			}
			want[j] = float32(float64(want[j]) + s)
		}
		got := clone(d0)
		ColumnSumInto(got, x, sh.rows, sh.cols)
		sameBits(t, fmt.Sprintf("ColumnSumInto %d×%d", sh.rows, sh.cols), got, want)
	}
}

func TestSIMDLayerNormMatchesScalar(t *testing.T) {
	skipIfFused(t) // y and dx are multiply-adds the scalar loop may fuse under GOAMD64=v3
	simdWidths(t)
	g := rng.New(105)
	for _, c := range simdCases(g, 2) {
		x, n := c.x, len(c.x)
		if n == 0 {
			continue
		}
		for i := range x { // an offset mean, as LayerNorm inputs may have
			x[i] += 7
		}
		k := float64(x[0])
		var absS, absQ float64
		for _, v := range x {
			absS += math.Abs(float64(v) - k)
			absQ += (float64(v) - k) * (float64(v) - k)
		}
		wantS := laneSum(n, func(j int) float64 { return float64(x[j]) - k })
		wantQ := laneSum(n, func(j int) float64 { a := float64(x[j]) - k; return a * a })
		gotS, gotQ, _ := rowSumsSIMD(x, k)
		sameBits64(t, "row sums, "+c.name, []float64{gotS, gotQ}, []float64{wantS, wantQ})
		scalarS, scalarQ := rowSums(x, k)
		closeSums(t, "row sum vs scalar, "+c.name, gotS, scalarS, n, absS)
		closeSums(t, "row sum of squares vs scalar, "+c.name, gotQ, scalarQ, n, absQ)

		w, b, dy := simdValues(g, n, 1, 0.02), simdValues(g, n, 1, 0.02), simdValues(g, n, 1, 0.02)
		m, rs := float32(7.25), float32(0.8)
		want := make([]float32, n)
		for j, v := range x {
			want[j] = (v-m)*rs*w[j] + b[j]
		}
		y := make([]float32, n)
		layerNormRowSIMD(y, x, w, b, m, rs)
		sameBits(t, "layernorm row, "+c.name, y, want)

		dw0, db0 := normal(g, n, 0, 1), normal(g, n, 0, 1)
		wantDw, wantDb := clone(dw0), clone(db0)
		scalarG, scalarGX := layerNormGradGo(wantDw, wantDb, dy, x, w, m, rs)
		dw, db := clone(dw0), clone(db0)
		gotG, gotGX, _ := layerNormGradSIMD(dw, db, dy, x, w, m, rs)
		sameBits(t, "layernorm dw, "+c.name, dw, wantDw)
		sameBits(t, "layernorm db, "+c.name, db, wantDb)
		xh := make([]float32, n)
		var absG, absGX float64
		for j, v := range x {
			xh[j] = (v - m) * rs
			absG += math.Abs(float64(dy[j] * w[j]))
			absGX += math.Abs(float64(dy[j]*w[j]) * float64(xh[j]))
		}
		wantG := laneSum(n, func(j int) float64 { return float64(dy[j] * w[j]) })
		wantGX := laneSum(n, func(j int) float64 { return float64(dy[j]*w[j]) * float64(xh[j]) })
		sameBits64(t, "layernorm grad sums, "+c.name, []float64{gotG, gotGX}, []float64{wantG, wantGX})
		closeSums(t, "layernorm Σg vs scalar, "+c.name, gotG, scalarG, n, absG)
		closeSums(t, "layernorm Σg·x̂ vs scalar, "+c.name, gotGX, scalarGX, n, absGX)

		mg, mgx := float32(0.031), float32(-0.47)
		for j, v := range x {
			xh := (v - m) * rs
			g := dy[j] * w[j]
			want[j] = (g - mg - xh*mgx) * rs
		}
		dx := make([]float32, n)
		layerNormDxSIMD(dx, dy, x, w, m, rs, mg, mgx)
		sameBits(t, "layernorm dx, "+c.name, dx, want)
	}
}

func TestSIMDSoftmaxBackwardMatchesScalar(t *testing.T) {
	simdWidths(t)
	g := rng.New(106)
	for _, c := range simdCases(g, 0.3) {
		p, n := c.x, len(c.x)
		dp := simdValues(g, n, 1, 0.02)
		d := float32(laneSum(n, func(j int) float64 { return float64(p[j]) * float64(dp[j]) }))
		got, _ := dotWideSIMD(p, dp)
		sameBits(t, "row dot, "+c.name, []float32{got}, []float32{d})
		if s := dotWide(p, dp); got != s && !(got != got && s != s) {
			// Both round float64 sums that differ in their last bits: adjacent float32 at most.
			if math.Nextafter32(s, got) != got {
				t.Fatalf("row dot, %s: %v, scalar %v: more than one float32 ulp apart", c.name, got, s)
			}
		}
		want := make([]float32, n)
		for j := range want {
			want[j] = 0.125 * p[j] * (dp[j] - 0.3)
		}
		ds := make([]float32, n)
		softmaxGradRowSIMD(ds, p, dp, 0.125, 0.3)
		sameBits(t, "softmax grad row, "+c.name, ds, want)
		softmaxGradRowSIMD(dp, p, dp, 0.125, 0.3) // ds aliasing dp
		sameBits(t, "softmax grad row in place, "+c.name, dp, want)
	}
}

func TestSIMDAdamMatchesScalar(t *testing.T) {
	simdWidths(t)
	g := rng.New(107)
	hypers := []AdamHyper{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 3, Decoupled: true},
		{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.01, Step: 1},
		{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-8, Step: 1000},
	}
	for _, c := range simdCases(g, 0.02) {
		n := len(c.x)
		grad := simdValues(g, n, 1e-3, 0.02)
		m0 := normal(g, n, 0, 1e-3)
		v0 := normal(g, n, 0, 1e-3)
		for i := range v0 {
			v0[i] *= v0[i]
		}
		for _, h := range hypers {
			what := fmt.Sprintf("%s, %+v", c.name, h)
			wp, wm, wv := clone(c.x), clone(m0), clone(v0)
			k := adamScalarsOf(h)
			adamGo(wp, grad, wm, wv, &k)
			p, m, v := clone(c.x), clone(m0), clone(v0)
			AdamStep(p, grad, m, v, h)
			sameBits(t, "adam param, "+what, p, wp)
			sameBits(t, "adam exp_avg, "+what, m, wm)
			sameBits(t, "adam exp_avg_sq, "+what, v, wv)
		}
	}
}
