package kernels

import "math"

// LayerNormForward normalizes each row of x over its cols elements (Ba, Kiros and Hinton
// 2016, as torch.nn.LayerNorm over the last dimension):
//
//	mean[r] = Σ_j x[r,j] / cols
//	var     = Σ_j (x[r,j] − mean[r])² / cols             (biased, as torch)
//	rstd[r] = 1 / sqrt(var + eps)
//	y[r,j]  = (x[r,j] − mean[r]) · rstd[r] · w[j] + b[j]
//
// Shapes: x, y [rows, cols]; w, b [cols]; mean, rstd [rows], saved for [LayerNormBackward].
//
// Accuracy: the row statistics are computed in one pass in float64 on values shifted by the
// row's first element, Σ(x−x₀) and Σ(x−x₀)²; since (x₀−mean)² ≤ cols·var the cancellation in
// var = E[(x−x₀)²] − E[x−x₀]² costs at most a factor cols, far inside float32 rounding for
// any realistic cols; rstd is formed in float64 with eps at its decimal value (1e-5f is the
// double 1e-5, as torch receives it). y is computed in float32 from the rounded mean and
// rstd.
//
// Aliasing: y may alias x exactly; mean and rstd must not overlap anything else.
// Panics if a length does not match the shape (a programmer bug).
func LayerNormForward(y, mean, rstd, x, w, b []float32, rows, cols int, eps float32) {
	const op = "LayerNormForward"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "y", len(y), rows*cols, "rows·cols")
	needLen(op, "mean", len(mean), rows, "rows")
	needLen(op, "rstd", len(rstd), rows, "rows")
	needLen(op, "w", len(w), cols, "cols")
	needLen(op, "b", len(b), cols, "cols")
	if cols == 0 {
		return
	}
	epsw := widen(eps)
	mean, rstd = mean[:rows], rstd[:rows]
	for r := range mean {
		xr := x[r*cols : r*cols+cols]
		mu, variance := rowMoments(xr)
		m := float32(mu)
		rs := float32(1 / math.Sqrt(variance+epsw))
		mean[r], rstd[r] = m, rs
		yr := y[r*cols : r*cols+cols]
		yr, wr, br := yr[:len(xr)], w[:len(xr)], b[:len(xr)]
		if layerNormRowSIMD(yr, xr, wr, br, m, rs) {
			continue
		}
		for j, v := range xr {
			yr[j] = (v-m)*rs*wr[j] + br[j]
		}
	}
}

// rowMoments returns the mean and biased variance of a non-empty row in float64, in one
// pass over values shifted by the first element (see LayerNormForward).
func rowMoments(x []float32) (mean, variance float64) {
	k := float64(x[0])
	s, q, ok := rowSumsSIMD(x, k)
	if !ok {
		s, q = rowSums(x, k)
	}
	n := float64(len(x))
	dm := s / n
	variance = q/n - dm*dm
	if variance < 0 {
		variance = 0
	}
	return k + dm, variance
}

// rowSums returns Σ(x−k) and Σ(x−k)² in float64 (four interleaved partial sums each; eight
// lanes on the vector paths).
func rowSums(x []float32, k float64) (sum, sumSq float64) {
	var s0, s1, s2, s3, q0, q1, q2, q3 float64 // four lanes break the add latency chains
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		a, b, c, d := float64(v[0])-k, float64(v[1])-k, float64(v[2])-k, float64(v[3])-k
		s0 += a
		s1 += b
		s2 += c
		s3 += d
		q0 += a * a
		q1 += b * b
		q2 += c * c
		q3 += d * d
	}
	for ; i < len(x); i++ {
		a := float64(x[i]) - k
		s0 += a
		q0 += a * a
	}
	return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)
}

// LayerNormBackward is the gradient of [LayerNormForward]. With x̂ = (x − mean)·rstd and
// g = dy ⊙ w, for each row:
//
//	dx[r,j] = rstd[r] · (g[j] − mean_j(g) − x̂[j] · mean_j(g ⊙ x̂))   (overwritten)
//	dw[j]  += Σ_r dy[r,j] · x̂[r,j]                                  (accumulated)
//	db[j]  += Σ_r dy[r,j]                                           (accumulated)
//
// Shapes: dx, dy, x [rows, cols]; w, dw, db [cols]; mean, rstd [rows] from the forward.
// dw and db are added to, so callers zero them first or accumulate across microbatches;
// callers splitting rows across goroutines give each worker its own dw, db (see
// [ParallelForWorker]).
//
// Accuracy: the two row sums are accumulated in float64; dx is computed in float32; dw and db
// are accumulated in float32 row by row, in row order.
//
// Aliasing: dx may alias dy or x exactly (each row is read fully before it is written);
// dw, db must not overlap any input. Panics if a length does not match (a programmer bug).
func LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w []float32, rows, cols int) {
	const op = "LayerNormBackward"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "dy", len(dy), rows*cols, "rows·cols")
	needLen(op, "dx", len(dx), rows*cols, "rows·cols")
	needLen(op, "mean", len(mean), rows, "rows")
	needLen(op, "rstd", len(rstd), rows, "rows")
	needLen(op, "w", len(w), cols, "cols")
	needLen(op, "dw", len(dw), cols, "cols")
	needLen(op, "db", len(db), cols, "cols")
	if cols == 0 {
		return
	}
	inv := 1 / float64(cols)
	mean, rstd = mean[:rows], rstd[:rows]
	for r := range mean {
		m, rs := mean[r], rstd[r]
		xr := x[r*cols : r*cols+cols]
		dyr := dy[r*cols : r*cols+cols]
		dyr, wr, dwr, dbr := dyr[:len(xr)], w[:len(xr)], dw[:len(xr)], db[:len(xr)]
		sumG, sumGX, ok := layerNormGradSIMD(dwr, dbr, dyr, xr, wr, m, rs)
		if !ok {
			sumG, sumGX = layerNormGradGo(dwr, dbr, dyr, xr, wr, m, rs)
		}
		mg := float32(sumG * inv)
		mgx := float32(sumGX * inv)
		dxr := dx[r*cols : r*cols+cols]
		dxr = dxr[:len(xr)]
		if layerNormDxSIMD(dxr, dyr, xr, wr, m, rs, mg, mgx) {
			continue
		}
		for j, v := range xr {
			xh := (v - m) * rs
			g := dyr[j] * wr[j]
			dxr[j] = (g - mg - xh*mgx) * rs
		}
	}
}

// layerNormGradGo is the first pass of LayerNormBackward over one row: with x̂ = (x − m)·rs
// and g = dy·w it adds dy·x̂ to dw and dy to db, and returns Σg and Σg·x̂ in float64 (two
// interleaved partial sums each; eight lanes on the vector paths).
func layerNormGradGo(dwr, dbr, dyr, xr, wr []float32, m, rs float32) (sumG, sumGX float64) {
	dyr, wr, dwr, dbr = dyr[:len(xr)], wr[:len(xr)], dwr[:len(xr)], dbr[:len(xr)]
	var sg0, sg1, sgx0, sgx1 float64 // two lanes break the add latency chains
	j := 0
	for ; j+2 <= len(xr); j += 2 {
		v, dv, wv := xr[j:j+2:j+2], dyr[j:j+2:j+2], wr[j:j+2:j+2]
		dwv, dbv := dwr[j:j+2:j+2], dbr[j:j+2:j+2]
		xh0, xh1 := (v[0]-m)*rs, (v[1]-m)*rs
		g0, g1 := dv[0]*wv[0], dv[1]*wv[1]
		sg0 += float64(g0)
		sg1 += float64(g1)
		sgx0 += float64(g0) * float64(xh0)
		sgx1 += float64(g1) * float64(xh1)
		dwv[0] += dv[0] * xh0
		dwv[1] += dv[1] * xh1
		dbv[0] += dv[0]
		dbv[1] += dv[1]
	}
	if j < len(xr) {
		xh := (xr[j] - m) * rs
		g := dyr[j] * wr[j]
		sg0 += float64(g)
		sgx0 += float64(g) * float64(xh)
		dwr[j] += dyr[j] * xh
		dbr[j] += dyr[j]
	}
	return sg0 + sg1, sgx0 + sgx1
}
