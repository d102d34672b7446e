package kernels

import "math"

// Constants of the float32 exponential, after Cephes' expf (S. L. Moshier): the argument is
// reduced to r = x − n·ln2, |r| ≤ ln2/2, with a two-part (Cody–Waite) ln2; exp(r) is the
// polynomial 1 + r + r²·P(r) with P of degree 5; 2^n goes into the exponent bits.
const (
	expLog2e     = 1.44269504088896341
	expC1        = 0.693359375     // ln2's high part: few bits, so n·expC1 is exact
	expC2        = -2.12194440e-4  // ln2 − expC1
	expMagic     = 12582912        // 1.5·2^23: adding it rounds a small float32 to an integer
	expMagicBits = 0x4B400000      // math.Float32bits(expMagic)
	expP0        = 1.9875691500e-4 // minimax coefficients of P, from Cephes expf.c
	expP1        = 1.3981999507e-3
	expP2        = 8.3334519073e-3
	expP3        = 4.1665795894e-2
	expP4        = 1.6666665459e-1
	expP5        = 5.0000001201e-1

	// expMin and expMax bound the arguments expCore accepts: 2^n must be a normal float32.
	expMin = -87.0
	expMax = 88.0
)

// expCore returns e^x for x in [expMin, expMax] with an error of about 1 ulp (the tests
// bound it by 1.25 ulp against math.Exp). Outside that range the result is garbage;
// a NaN argument gives NaN. It is small enough to inline into the hot loops, which clamp
// or range-check its argument first (at inlining cost 80, exactly the budget: adding
// anything here stops it from inlining and slows every scalar loop that uses it).
func expCore(x float32) float32 {
	t := x*expLog2e + expMagic
	n := t - expMagic
	r := x - n*expC1 - n*expC2
	y := (((((expP0*r+expP1)*r+expP2)*r+expP3)*r+expP4)*r+expP5)*r*r + r + 1
	// t's low mantissa bits hold n in two's complement (expMagic's low 9 bits are 0), so
	// shifting them into the exponent field and adding the bias 127<<23 gives 2^n.
	return y * math.Float32frombits(math.Float32bits(t)<<23+0x3F800000)
}

// expf returns e^x in float32: expCore inside [expMin, expMax], math.Exp (rounded to
// float32) elsewhere, so subnormal results, overflow, ±Inf and NaN behave as math.Exp.
// The hot loops below repeat its range check inline (expf itself is too large to inline).
func expf(x float32) float32 {
	if x >= expMin && x <= expMax {
		return expCore(x)
	}
	return expSlow(x)
}

// expSlow is expf outside the polynomial's range, kept out of line so that callers inline.
//
//go:noinline
func expSlow(x float32) float32 { return float32(math.Exp(float64(x))) }

// expAffine sets dst[j] = m·expf(a·x[j] − c) and returns Σ_j expf(a·x[j] − c) accumulated in
// float64 (two interleaved partial sums; eight lanes on the vector paths, see simd_amd64.go).
// A −Inf exponent (a masked score) gives exactly 0, NaN propagates. dst may alias x exactly.
func expAffine(dst, x []float32, a, c, m float32) float64 {
	dst = dst[:len(x)]
	if s, ok := expAffineSIMD(dst, x, a, c, m); ok {
		return s
	}
	return expAffineGo(dst, x, a, c, m)
}

// expAffineGo is expAffine's scalar loop.
func expAffineGo(dst, x []float32, a, c, m float32) float64 {
	dst = dst[:len(x)]
	var s0, s1 float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		v := x[i : i+2 : i+2]
		z0, z1 := a*v[0]-c, a*v[1]-c
		var e0, e1 float32
		if z0 >= expMin && z0 <= expMax {
			e0 = expCore(z0)
		} else {
			e0 = expSlow(z0)
		}
		if z1 >= expMin && z1 <= expMax {
			e1 = expCore(z1)
		} else {
			e1 = expSlow(z1)
		}
		s0 += float64(e0)
		s1 += float64(e1)
		d := dst[i : i+2 : i+2]
		d[0], d[1] = m*e0, m*e1
	}
	if i < len(x) {
		e := expf(a*x[i] - c)
		s0 += float64(e)
		dst[i] = m * e
	}
	return s0 + s1
}

// sumExpAffine returns Σ_j expf(a·x[j] − c) in float64, as expAffine without the stores.
func sumExpAffine(x []float32, a, c float32) float64 {
	if s, ok := sumExpAffineSIMD(x, a, c); ok {
		return s
	}
	return sumExpAffineGo(x, a, c)
}

// sumExpAffineGo is sumExpAffine's scalar loop.
func sumExpAffineGo(x []float32, a, c float32) float64 {
	var s0, s1 float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		v := x[i : i+2 : i+2]
		z0, z1 := a*v[0]-c, a*v[1]-c
		var e0, e1 float32
		if z0 >= expMin && z0 <= expMax {
			e0 = expCore(z0)
		} else {
			e0 = expSlow(z0)
		}
		if z1 >= expMin && z1 <= expMax {
			e1 = expCore(z1)
		} else {
			e1 = expSlow(z1)
		}
		s0 += float64(e0)
		s1 += float64(e1)
	}
	if i < len(x) {
		s0 += float64(expf(a*x[i] - c))
	}
	return s0 + s1
}

// maxScaled returns max_j a·x[j] (the products are compared, whatever a's sign), −Inf for an
// empty x, NaN if any product is NaN.
func maxScaled(x []float32, a float32) float32 {
	if m, ok := maxScaledSIMD(x, a); ok {
		return m
	}
	return maxScaledGo(x, a)
}

// maxScaledGo is maxScaled's scalar loop.
func maxScaledGo(x []float32, a float32) float32 {
	m0, m1 := float32(math.Inf(-1)), float32(math.Inf(-1))
	i := 0
	for ; i+2 <= len(x); i += 2 {
		v := x[i : i+2 : i+2]
		m0 = max(m0, a*v[0])
		m1 = max(m1, a*v[1])
	}
	if i < len(x) {
		m0 = max(m0, a*x[i])
	}
	return max(m0, m1)
}
