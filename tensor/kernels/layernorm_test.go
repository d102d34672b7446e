package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// refLayerNorm is LayerNorm in float64 by its definition (two passes).
func refLayerNorm(x, w, b []float64, rows, cols int, eps float64) (y, mean, rstd []float64) {
	y, mean, rstd = make([]float64, rows*cols), make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		var s float64
		for j := 0; j < cols; j++ {
			s += x[r*cols+j]
		}
		mu := s / float64(cols)
		var q float64
		for j := 0; j < cols; j++ {
			d := x[r*cols+j] - mu
			q += d * d
		}
		rs := 1 / math.Sqrt(q/float64(cols)+eps)
		mean[r], rstd[r] = mu, rs
		for j := 0; j < cols; j++ {
			y[r*cols+j] = (x[r*cols+j]-mu)*rs*w[j] + b[j]
		}
	}
	return y, mean, rstd
}

// refLayerNormBackward is the LayerNorm gradient in float64, from the chain rule written out
// term by term: dx_j = Σ_k dy_k·w_k·∂x̂_k/∂x_j with ∂x̂_k/∂x_j = rstd·(δ_kj − 1/n − x̂_k·x̂_j/n).
func refLayerNormBackward(dy, x, w []float64, rows, cols int, eps float64) (dx, dw, db []float64) {
	_, mean, rstd := refLayerNorm(x, w, make([]float64, cols), rows, cols, eps)
	dx, dw, db = make([]float64, rows*cols), make([]float64, cols), make([]float64, cols)
	n := float64(cols)
	for r := 0; r < rows; r++ {
		xh := make([]float64, cols)
		for k := range xh {
			xh[k] = (x[r*cols+k] - mean[r]) * rstd[r]
			dw[k] += dy[r*cols+k] * xh[k]
			db[k] += dy[r*cols+k]
		}
		for j := 0; j < cols; j++ {
			var s float64
			for k := 0; k < cols; k++ {
				delta := 0.0
				if j == k {
					delta = 1
				}
				s += dy[r*cols+k] * w[k] * rstd[r] * (delta - 1/n - xh[k]*xh[j]/n)
			}
			dx[r*cols+j] = s
		}
	}
	return dx, dw, db
}

func TestLayerNormForwardMatchesReference(t *testing.T) {
	g := rng.New(1)
	for _, sh := range []struct{ rows, cols int }{{1, 1}, {3, 7}, {17, 64}, {5, 257}} {
		rows, cols := sh.rows, sh.cols
		// An offset mean makes a one-pass E[x²]−E[x]² lose digits; the kernel must not.
		x := normal(g, rows*cols, 30, 2)
		w := normal(g, cols, 1, 0.5)
		b := normal(g, cols, 0, 0.5)
		y := make([]float32, rows*cols)
		mean, rstd := make([]float32, rows), make([]float32, rows)
		LayerNormForward(y, mean, rstd, x, w, b, rows, cols, 1e-5)
		wy, wm, wr := refLayerNorm(to64(x), to64(w), to64(b), rows, cols, 1e-5)
		checkClose(t, "mean", mean, wm, 1e-7, 0)
		checkClose(t, "rstd", rstd, wr, 1e-6, 0)
		checkClose(t, "y", y, wy, 1e-5, 1e-5)

		// In place: y aliases x.
		LayerNormForward(x, mean, rstd, x, w, b, rows, cols, 1e-5)
		checkClose(t, "y in place", x, wy, 1e-5, 1e-5)
	}
}

func TestLayerNormLargeOffset(t *testing.T) {
	// mean/std = 1e4: the statistics still come out to float32 accuracy.
	g := rng.New(2)
	rows, cols := 4, 512
	x := normal(g, rows*cols, 1e4, 1)
	w, b := make([]float32, cols), make([]float32, cols)
	for j := range w {
		w[j] = 1
	}
	y := make([]float32, rows*cols)
	mean, rstd := make([]float32, rows), make([]float32, rows)
	LayerNormForward(y, mean, rstd, x, w, b, rows, cols, 1e-5)
	_, wm, wr := refLayerNorm(to64(x), to64(w), to64(b), rows, cols, 1e-5)
	checkClose(t, "mean", mean, wm, 1e-7, 0)
	checkClose(t, "rstd", rstd, wr, 1e-6, 0)
}

func TestLayerNormConstantRow(t *testing.T) {
	// Zero variance: rstd = 1/sqrt(eps), y = b.
	x := []float32{3, 3, 3, 3}
	w := []float32{1, 2, 3, 4}
	b := []float32{0.5, -1, 0, 2}
	y := make([]float32, 4)
	mean, rstd := make([]float32, 1), make([]float32, 1)
	LayerNormForward(y, mean, rstd, x, w, b, 1, 4, 1e-5)
	if mean[0] != 3 || rstd[0] != float32(1/math.Sqrt(1e-5)) {
		t.Errorf("mean, rstd = %v, %v; want 3, %v", mean[0], rstd[0], float32(1/math.Sqrt(1e-5)))
	}
	for j := range y {
		if y[j] != b[j] {
			t.Errorf("y[%d] = %v, want %v", j, y[j], b[j])
		}
	}
}

func TestLayerNormBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	g := rng.New(3)
	rows, cols, eps := 3, 6, 1e-5
	x, w, b := to64(normal(g, rows*cols, 0.3, 1)), to64(normal(g, cols, 1, 0.3)), to64(normal(g, cols, 0, 0.3))
	dy := to64(normal(g, rows*cols, 0, 1))
	dx, dw, db := refLayerNormBackward(dy, x, w, rows, cols, eps)
	loss := func(x, w, b []float64) float64 {
		y, _, _ := refLayerNorm(x, w, b, rows, cols, eps)
		return dot64(y, dy)
	}
	checkClose64(t, "dx vs FD", dx, centralDiff(func(v []float64) float64 { return loss(v, w, b) }, x, 1e-6), 1e-6, 1e-8)
	checkClose64(t, "dw vs FD", dw, centralDiff(func(v []float64) float64 { return loss(x, v, b) }, w, 1e-6), 1e-6, 1e-8)
	checkClose64(t, "db vs FD", db, centralDiff(func(v []float64) float64 { return loss(x, w, v) }, b, 1e-6), 1e-6, 1e-8)
}

func TestLayerNormBackwardMatchesReference(t *testing.T) {
	g := rng.New(4)
	for _, sh := range []struct{ rows, cols int }{{1, 2}, {4, 9}, {16, 128}} {
		rows, cols := sh.rows, sh.cols
		x := normal(g, rows*cols, 0.5, 1.5)
		w := normal(g, cols, 1, 0.5)
		b := normal(g, cols, 0, 0.5)
		dy := normal(g, rows*cols, 0, 1)
		y := make([]float32, rows*cols)
		mean, rstd := make([]float32, rows), make([]float32, rows)
		LayerNormForward(y, mean, rstd, x, w, b, rows, cols, 1e-5)

		// dw, db accumulate onto what is there.
		dw0, db0 := normal(g, cols, 0, 1), normal(g, cols, 0, 1)
		dw, db := clone(dw0), clone(db0)
		dx := make([]float32, rows*cols)
		LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, rows, cols)

		wdx, wdw, wdb := refLayerNormBackward(to64(dy), to64(x), to64(w), rows, cols, 1e-5)
		for j := range wdw {
			wdw[j] += float64(dw0[j])
			wdb[j] += float64(db0[j])
		}
		checkClose(t, "dx", dx, wdx, 1e-4, 1e-5)
		checkClose(t, "dw", dw, wdw, 1e-5, 1e-5)
		checkClose(t, "db", db, wdb, 1e-5, 1e-5)

		// dx aliasing dy and aliasing x give the same dx.
		dyc := clone(dy)
		LayerNormBackward(dyc, make([]float32, cols), make([]float32, cols), dyc, x, mean, rstd, w, rows, cols)
		checkClose(t, "dx aliasing dy", dyc, to64(dx), 0, 0)
		xc := clone(x)
		LayerNormBackward(xc, make([]float32, cols), make([]float32, cols), dy, xc, mean, rstd, w, rows, cols)
		checkClose(t, "dx aliasing x", xc, to64(dx), 0, 0)
	}
}

func TestLayerNormPanicsOnBadLength(t *testing.T) {
	mustPanic(t, "len(w)", func() {
		LayerNormForward(make([]float32, 6), make([]float32, 2), make([]float32, 2), make([]float32, 6),
			make([]float32, 2), make([]float32, 3), 2, 3, 1e-5)
	})
	mustPanic(t, "len(rstd)", func() {
		LayerNormBackward(make([]float32, 6), make([]float32, 3), make([]float32, 3), make([]float32, 6),
			make([]float32, 6), make([]float32, 2), make([]float32, 1), make([]float32, 3), 2, 3)
	})
}
