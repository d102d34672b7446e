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
		layerNormRow(y[r*cols:r*cols+cols], xr, w, b, m, rs)
	}
}

// layerNormRow sets y[j] = ((x[j] − m)·rs)·w[j] + b[j] in float32, each product rounded
// before the add, for len(y) = len(w) = len(b) = len(x).
func layerNormRow(y, x, w, b []float32, m, rs float32) {
	y, w, b = y[:len(x)], w[:len(x)], b[:len(x)]
	n := layerNormRowSIMD(y, x, w, b, m, rs)
	y, x, w, b = y[n:], x[n:], w[n:], b[n:]
	y, w, b = y[:len(x)], w[:len(x)], b[:len(x)]
	for j, v := range x {
		y[j] = float32((v-m)*rs*w[j]) + b[j]
	}
}

// rowMoments returns the mean and biased variance of a non-empty row in float64, in one
// pass over values shifted by the first element (see LayerNormForward), both sums in the
// lanes of [sum8].
func rowMoments(x []float32) (mean, variance float64) {
	k := float64(x[0])
	n, s, q := rowMomentsSIMD(x, k)
	sum, sumSq := rowMomentsGo(&s, &q, x[n:], k)
	nf := float64(len(x))
	dm := sum / nf
	variance = sumSq/nf - dm*dm
	if variance < 0 {
		variance = 0
	}
	return k + dm, variance
}

// rowMomentsGo returns Σ(x−k) and Σ(x−k)² continuing the lanes s and q from an element with
// index ≡ 0 (mod 8). The squares are rounded before they are added (never fused).
func rowMomentsGo(s, q *sum8, x []float32, k float64) (sum, sumSq float64) {
	s0, s1, s2, s3, s4, s5, s6, s7 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
	q0, q1, q2, q3, q4, q5, q6, q7 := q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		a, b, c, d := float64(v[0])-k, float64(v[1])-k, float64(v[2])-k, float64(v[3])-k
		s0 += a
		s1 += b
		s2 += c
		s3 += d
		q0 += float64(a * a)
		q1 += float64(b * b)
		q2 += float64(c * c)
		q3 += float64(d * d)
		a, b, c, d = float64(v[4])-k, float64(v[5])-k, float64(v[6])-k, float64(v[7])-k
		s4 += a
		s5 += b
		s6 += c
		s7 += d
		q4 += float64(a * a)
		q5 += float64(b * b)
		q6 += float64(c * c)
		q7 += float64(d * d)
	}
	*s = sum8{s0, s1, s2, s3, s4, s5, s6, s7}
	*q = sum8{q0, q1, q2, q3, q4, q5, q6, q7}
	for j, v := range x[i:] {
		a := float64(v) - k
		s[j] += a
		q[j] += float64(a * a)
	}
	return s.total(), q.total()
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
// Accuracy: the two row sums are accumulated in float64 (in the lanes of [sum8]); dx is
// computed in float32; dw and db are accumulated in float32 row by row, in row order.
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
		n, sg, sgx := layerNormGradSIMD(dw, db, dyr, xr, w, m, rs)
		sumG, sumGX := layerNormGradGo(&sg, &sgx, dw[n:], db[n:], dyr[n:], xr[n:], w[n:], m, rs)
		mg := float32(sumG * inv)
		mgx := float32(sumGX * inv)
		layerNormDx(dx[r*cols:r*cols+cols], dyr, xr, w, m, rs, mg, mgx)
	}
}

// layerNormGradGo is the first pass of LayerNormBackward over one row from an element with
// index ≡ 0 (mod 8): with x̂ = (x − m)·rs and g = dy·w, it adds dy·x̂ to dw and dy to db and
// returns Σg and Σg·x̂, continuing the lanes sg and sgx (the products g·x̂ are exact in
// float64).
func layerNormGradGo(sg, sgx *sum8, dw, db, dy, x, w []float32, m, rs float32) (sumG, sumGX float64) {
	dy, w, dw, db = dy[:len(x)], w[:len(x)], dw[:len(x)], db[:len(x)]
	for j, v := range x {
		xh := (v - m) * rs
		g := dy[j] * w[j]
		sg[j%8] += float64(g)
		sgx[j%8] += float64(g) * float64(xh)
		dw[j] += float32(dy[j] * xh)
		db[j] += dy[j]
	}
	return sg.total(), sgx.total()
}

// layerNormDx sets dx[j] = ((g − mg) − x̂·mgx)·rs with x̂ = (x[j] − m)·rs, g = dy[j]·w[j], the
// product x̂·mgx rounded before the subtraction.
func layerNormDx(dx, dy, x, w []float32, m, rs, mg, mgx float32) {
	dx, dy, w = dx[:len(x)], dy[:len(x)], w[:len(x)]
	n := layerNormDxSIMD(dx, dy, x, w, m, rs, mg, mgx)
	dx, dy, x, w = dx[n:], dy[n:], x[n:], w[n:]
	dx, dy, w = dx[:len(x)], dy[:len(x)], w[:len(x)]
	for j, v := range x {
		xh := (v - m) * rs
		g := dy[j] * w[j]
		dx[j] = (g - mg - float32(xh*mgx)) * rs
	}
}
