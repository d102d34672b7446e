package kernels

const (
	geluA = -2 * 0.7978845608028654            // −2·√(2/π): −2u = x·(geluA + geluB·x²)
	geluB = -2 * 0.7978845608028654 * 0.044715 // −2·√(2/π)·0.044715
	geluK = 2 * 0.7978845608028654             // 2·√(2/π)
	geluC = 3 * 0.044715                       // 3·0.044715
)

// GeluForward sets y[i] = gelu(x[i]), the tanh approximation of GELU (Hendrycks and Gimpel
// 2016; torch.nn.functional.gelu with approximate='tanh'):
//
//	gelu(x) = 0.5·x·(1 + tanh(u)),   u = √(2/π)·(x + 0.044715·x³)
//
// The kernels use the identity 0.5·(1 + tanh(u)) = σ(2u) = 1/(1 + e^(−2u)), so
//
//	gelu(x)  = x·s,                          s = 1/(1 + e),  e = e^(−2u)
//	gelu'(x) = s + x·s·(1−s)·2u' = s·(1 + 2·x·(e·s)·√(2/π)·(1 + 3·0.044715·x²))
//
// which needs one float32 exponential per element (expf, about 1 ulp) and has no
// cancellation: 1 − s is formed as e·s. Everything is float32. Where −2u < −87 (x > 17),
// s is 1 to float32 precision. For x < −10, where −2u > 88, gelu' is returned as 0 (its
// true magnitude is below 1e-35), and gelu underflows to −0 once e^(−2u) overflows. NaN
// gives NaN; gelu(+Inf) = +Inf and gelu(−Inf) = NaN, as 0.5·x·(1 + tanh u) evaluates.
//
// y may alias x exactly. Panics if the lengths differ (a programmer bug).
func GeluForward(y, x []float32) {
	needLen("GeluForward", "y", len(y), len(x), "len(x)")
	y = y[:len(x)]
	if geluForwardSIMD(y, x) {
		return
	}
	geluForwardGo(y, x)
}

// geluForwardGo is GeluForward's scalar loop.
func geluForwardGo(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		z := v * (geluA + geluB*v*v)
		var e float32
		if z >= expMin && z <= expMax {
			e = expCore(z)
		} else {
			e = expSlow(z) // +Inf past 88.7: y = x/Inf = −0
		}
		y[i] = v / (1 + e)
	}
}

// GeluBackward sets dx[i] = dy[i]·gelu'(x[i]) with gelu' as given at [GeluForward],
// overwriting dx.
// dx may alias dy or x exactly. Panics if the lengths differ (a programmer bug).
func GeluBackward(dx, dy, x []float32) {
	needLen("GeluBackward", "dy", len(dy), len(x), "len(x)")
	needLen("GeluBackward", "dx", len(dx), len(x), "len(x)")
	dx, dy = dx[:len(x)], dy[:len(x)]
	if geluBackwardSIMD(dx, dy, x) {
		return
	}
	geluBackwardGo(dx, dy, x)
}

// geluBackwardGo is GeluBackward's scalar loop.
func geluBackwardGo(dx, dy, x []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	for i, v := range x {
		v2 := v * v
		z := v * (geluA + geluB*v2)
		var d float32
		if z >= expMin && z <= expMax {
			e := expCore(z)
			s := 1 / (1 + e)
			d = s * (1 + v*(e*s)*(geluK+geluK*geluC*v2))
		} else {
			d = geluGradOutside(z)
		}
		dx[i] = dy[i] * d
	}
}

// BiasGeluForward sets y[r,j] = gelu(x[r,j] + bias[j]) for x, y [rows, cols] and bias [cols]:
// the bias add of linear_fc1 fused with the activation, storing nothing else (the backward
// recomputes x + bias). The sum is rounded to float32 before the activation, as an unfused
// add followed by gelu would. y may alias x exactly. Panics on a length mismatch (a
// programmer bug).
func BiasGeluForward(y, x, bias []float32, rows, cols int) {
	const op = "BiasGeluForward"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "y", len(y), rows*cols, "rows·cols")
	needLen(op, "bias", len(bias), cols, "cols")
	if biasGeluForwardSIMD(y, x, bias, rows, cols) {
		return
	}
	for r := 0; r < rows; r++ {
		yr := y[r*cols : r*cols+cols]
		Add(yr, x[r*cols:r*cols+cols], bias) // y = x + b, the row stays in L1 ...
		GeluForward(yr, yr)                  // ... for the activation in place
	}
}

// BiasGeluBackward is the gradient of [BiasGeluForward]: with u = x + bias (rounded to
// float32),
//
//	dx[r,j]   = dy[r,j]·gelu'(u[r,j])        (overwritten)
//	dbias[j] += Σ_r dx[r,j]                   (accumulated in float32, in row order)
//
// Shapes: dx, dy, x [rows, cols]; bias, dbias [cols]. u is formed 256 columns at a time in a
// stack buffer, so dx may alias dy or x exactly; dbias must not overlap an input. Callers
// splitting rows across goroutines give each worker its own dbias. Panics on a length
// mismatch (a programmer bug).
func BiasGeluBackward(dx, dbias, dy, x, bias []float32, rows, cols int) {
	const op = "BiasGeluBackward"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "dy", len(dy), rows*cols, "rows·cols")
	needLen(op, "dx", len(dx), rows*cols, "rows·cols")
	needLen(op, "bias", len(bias), cols, "cols")
	needLen(op, "dbias", len(dbias), cols, "cols")
	if biasGeluBackwardSIMD(dx, dbias, dy, x, bias, rows, cols) {
		return
	}
	var buf [columnBlock]float32
	for r := 0; r < rows; r++ {
		for c0 := 0; c0 < cols; c0 += columnBlock {
			lo, hi := r*cols+c0, r*cols+min(cols, c0+columnBlock)
			u := buf[:hi-lo]
			Add(u, x[lo:hi], bias[c0:c0+len(u)])
			GeluBackward(dx[lo:hi], dy[lo:hi], u)
			AddInto(dbias[c0:c0+len(u)], dx[lo:hi])
		}
	}
}

// geluGradOutside is gelu' where −2u is outside [expMin, expMax]: 1 for large x (1 − s is
// below 2^-125, so gelu' rounds to 1), 0 for very negative x (|gelu'| < 1e-35), NaN for NaN.
//
//go:noinline
func geluGradOutside(z float32) float32 {
	switch {
	case z < expMin:
		return 1
	case z > expMax:
		return 0
	}
	return z // NaN
}
