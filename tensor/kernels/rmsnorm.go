package kernels

import "math"

// RMSNormForward normalizes each row of x by its root mean square (Zhang and Sennrich 2019,
// Megatron's RMSNorm):
//
//	rstd[r] = 1 / sqrt(Σ_j x[r,j]² / cols + eps)
//	y[r,j]  = x[r,j] · rstd[r] · w[j]
//
// Shapes: x, y [rows, cols]; w [cols]; rstd [rows], saved for [RMSNormBackward].
//
// Accuracy: the sum of squares is SumSquares' (float64) and rstd is formed in float64 with
// eps at its decimal value; y is computed in float32 from the rounded rstd.
//
// Aliasing: y may alias x exactly; rstd must not overlap anything else.
// Panics if a length does not match the shape (a programmer bug).
func RMSNormForward(y, rstd, x, w []float32, rows, cols int, eps float32) {
	const op = "RMSNormForward"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "y", len(y), rows*cols, "rows·cols")
	needLen(op, "rstd", len(rstd), rows, "rows")
	needLen(op, "w", len(w), cols, "cols")
	if cols == 0 {
		return
	}
	epsw := widen(eps)
	for r := range rstd[:rows] {
		xr := x[r*cols : r*cols+cols]
		rs := float32(1 / math.Sqrt(SumSquares(xr)/float64(cols)+epsw))
		rstd[r] = rs
		yr, wr := y[r*cols:r*cols+cols], w[:len(xr)]
		yr = yr[:len(xr)]
		for j, v := range xr {
			yr[j] = v * rs * wr[j]
		}
	}
}

// RMSNormBackward is the gradient of [RMSNormForward]. With x̂ = x·rstd and g = dy ⊙ w, for
// each row:
//
//	dx[r,j] = rstd[r] · (g[j] − x̂[j] · mean_j(g ⊙ x̂))   (overwritten)
//	dw[j]  += Σ_r dy[r,j] · x̂[r,j]                      (accumulated)
//
// Shapes: dx, dy, x [rows, cols]; w, dw [cols]; rstd [rows] from the forward. dw is added
// to (see [LayerNormBackward] for splitting rows over workers).
//
// Accuracy: the row sum is accumulated in float64; dx is computed in float32; dw is
// accumulated in float32 row by row, in row order.
//
// Aliasing: dx may alias dy or x exactly; dw must not overlap any input.
// Panics if a length does not match (a programmer bug).
func RMSNormBackward(dx, dw, dy, x, rstd, w []float32, rows, cols int) {
	const op = "RMSNormBackward"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "dy", len(dy), rows*cols, "rows·cols")
	needLen(op, "dx", len(dx), rows*cols, "rows·cols")
	needLen(op, "rstd", len(rstd), rows, "rows")
	needLen(op, "w", len(w), cols, "cols")
	needLen(op, "dw", len(dw), cols, "cols")
	if cols == 0 {
		return
	}
	inv := 1 / float64(cols)
	for r, rs := range rstd[:rows] {
		xr := x[r*cols : r*cols+cols]
		dyr := dy[r*cols : r*cols+cols]
		dyr, wr, dwr := dyr[:len(xr)], w[:len(xr)], dw[:len(xr)]
		var s0, s1 float64
		j := 0
		for ; j+2 <= len(xr); j += 2 {
			xh0, xh1 := xr[j]*rs, xr[j+1]*rs
			dwr[j] += dyr[j] * xh0
			dwr[j+1] += dyr[j+1] * xh1
			s0 += float64(dyr[j] * wr[j] * xh0)
			s1 += float64(dyr[j+1] * wr[j+1] * xh1)
		}
		for ; j < len(xr); j++ {
			xh := xr[j] * rs
			dwr[j] += dyr[j] * xh
			s0 += float64(dyr[j] * wr[j] * xh)
		}
		mgx := float32((s0 + s1) * inv)
		dxr := dx[r*cols : r*cols+cols]
		dxr = dxr[:len(xr)]
		for j, v := range xr {
			dxr[j] = (dyr[j]*wr[j] - v*rs*mgx) * rs
		}
	}
}
