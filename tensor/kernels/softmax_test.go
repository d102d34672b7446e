package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// refCausalSoftmax returns the s×s probabilities (stride s) and lse of the scaled scores.
func refCausalSoftmax(scores []float64, ld, s int, scale float64) (p, lse []float64) {
	p, lse = make([]float64, s*s), make([]float64, s)
	for i := 0; i < s; i++ {
		row := make([]float64, i+1)
		for j := range row {
			row[j] = scale * scores[i*ld+j]
		}
		lse[i] = refLSE(row)
		for j := range row {
			p[i*s+j] = math.Exp(row[j] - lse[i])
		}
	}
	return p, lse
}

// refSoftmaxBackward is the Jacobian-vector product of the causal softmax written out:
// ds_ij = Σ_k dp_ik·∂p_ik/∂x_ij with ∂p_ik/∂x_ij = scale·p_ik·(δ_kj − p_ij).
func refSoftmaxBackward(p, dp []float64, s int, scale float64) []float64 {
	ds := make([]float64, s*s)
	for i := 0; i < s; i++ {
		for j := 0; j <= i; j++ {
			var v float64
			for k := 0; k <= i; k++ {
				delta := 0.0
				if k == j {
					delta = 1
				}
				v += dp[i*s+k] * scale * p[i*s+k] * (delta - p[i*s+j])
			}
			ds[i*s+j] = v
		}
	}
	return ds
}

// block extracts the s×s block of stride ld as a dense float32 slice.
func block(x []float32, ld, s int) []float32 {
	out := make([]float32, 0, s*s)
	for i := 0; i < s; i++ {
		out = append(out, x[i*ld:i*ld+s]...)
	}
	return out
}

func TestCausalSoftmaxForwardAndRecompute(t *testing.T) {
	g := rng.New(13)
	for _, c := range []struct{ s, ld int }{{1, 1}, {5, 5}, {33, 40}, {64, 64}} {
		s, ld := c.s, c.ld
		scale := float32(1 / math.Sqrt(64))
		scores := normal(g, (s-1)*ld+s, 0, 8)
		wantP, wantLSE := refCausalSoftmax(to64(scores), ld, s, float64(scale))

		p := clone(scores)
		lse := make([]float32, s)
		CausalSoftmaxForward(p, ld, s, scale, lse)
		checkClose(t, "lse", lse, wantLSE, 2e-7, 1e-7)
		checkClose(t, "p", block(p, ld, s), wantP, 4e-7, 1e-12)
		// The padding columns beyond s are left alone.
		for i := 0; i < s-1; i++ {
			for j := s; j < ld; j++ {
				if p[i*ld+j] != scores[i*ld+j] {
					t.Fatalf("column %d of row %d (outside the block) changed", j, i)
				}
			}
		}

		r := clone(scores)
		CausalSoftmaxRecompute(r, ld, s, scale, lse)
		checkClose(t, "recomputed p", block(r, ld, s), wantP, 4e-7, 1e-12)
	}
}

func TestCausalSoftmaxMaskedScores(t *testing.T) {
	// A −Inf score (an extra mask) gets probability 0; a fully masked row gives NaN, as torch.
	inf := float32(math.Inf(-1))
	p := []float32{inf, 0, 0, 1, inf, 0, 2, 0, 3}
	lse := make([]float32, 3)
	CausalSoftmaxForward(p, 3, 3, 1, lse)
	if p[0] == p[0] {
		t.Errorf("fully masked row: p = %v, want NaN", p[0])
	}
	if p[3] != 1 || p[4] != 0 || p[5] != 0 {
		t.Errorf("row 1 = %v, want [1 0 0]", p[3:6])
	}
}

func TestSoftmaxBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	g := rng.New(14)
	s, scale := 4, 0.7
	x := to64(normal(g, s*s, 0, 1))
	dp := to64(normal(g, s*s, 0, 1))
	p, _ := refCausalSoftmax(x, s, s, scale)
	loss := func(v []float64) float64 {
		q, _ := refCausalSoftmax(v, s, s, scale)
		return dot64(q, dp)
	}
	checkClose64(t, "ds vs FD", refSoftmaxBackward(p, dp, s, scale), centralDiff(loss, x, 1e-6), 1e-6, 1e-9)
}

func TestSoftmaxBackwardRowsMatchesReference(t *testing.T) {
	g := rng.New(15)
	s, ld := 37, 45
	scale := float32(0.125)
	scores := normal(g, (s-1)*ld+s, 0, 8)
	p := clone(scores)
	lse := make([]float32, s)
	CausalSoftmaxForward(p, ld, s, scale, lse)
	dp := normal(g, len(p), 0, 1)
	ds := make([]float32, len(p))
	for i := range ds {
		ds[i] = 7 // overwritten in the block, untouched outside it
	}
	SoftmaxBackwardRows(ds, p, dp, ld, s, scale)
	want := refSoftmaxBackward(to64(block(p, ld, s)), to64(block(dp, ld, s)), s, float64(scale))
	checkClose(t, "ds", block(ds, ld, s), want, 1e-5, 1e-8)
	if ds[ld-1] != 7 {
		t.Error("SoftmaxBackwardRows wrote outside the s×s block")
	}
	// In place over dp.
	d := clone(dp)
	SoftmaxBackwardRows(d, p, d, ld, s, scale)
	checkClose(t, "ds aliasing dp", block(d, ld, s), to64(block(ds, ld, s)), 0, 0)
}

func TestSoftmaxPanicsOnShortBuffer(t *testing.T) {
	mustPanic(t, "len(p)", func() { CausalSoftmaxForward(make([]float32, 8), 3, 3, 1, make([]float32, 3)) })
	mustPanic(t, "ld = 2", func() { CausalSoftmaxRecompute(make([]float32, 9), 2, 3, 1, make([]float32, 3)) })
}
