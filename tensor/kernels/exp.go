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
	// Below expZero, e^x rounds to +0 in float32 (e^-104 < 2^-150, half the smallest
	// subnormal), so expf returns exactly 0 there.
	expZero = -104.0
)

// expCore returns e^x for x in [expMin, expMax] with an error of about 1 ulp (the tests
// bound it by 1.25 ulp against math.Exp). Outside that range the result is garbage;
// a NaN argument gives NaN. It is small enough to inline into the hot loops, which clamp
// or range-check its argument first.
//
// Every operation is rounded to float32 in the order written: the explicit conversions stop
// the compiler from fusing a multiply and an add (which it may do for GOAMD64=v3), so the
// result is the same on every platform and equals the vector paths' bit for bit.
func expCore(x float32) float32 {
	t := float32(x*expLog2e) + expMagic
	n := t - expMagic
	r := x - float32(n*expC1) - float32(n*expC2)
	p := float32(expP0*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	y := float32(float32(p*r)*r) + r + 1
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
// float64 in the lanes of [sum8]. The product a·x[j] is rounded before c is subtracted. A −Inf
// exponent (a masked score) gives exactly 0, NaN propagates. dst may alias x exactly. The
// vector paths (expAffineSIMD) give the same bits.
func expAffine(dst, x []float32, a, c, m float32) float64 {
	dst = dst[:len(x)]
	n, s := expAffineSIMD(dst, x, a, c, m)
	return expAffineGo(&s, dst[n:], x[n:], a, c, m)
}

// expAffineGo is expAffine's scalar loop, continuing the lanes s (the vector paths' partial
// sums, or zeros) from the element with index ≡ 0 (mod 8).
func expAffineGo(s *sum8, dst, x []float32, a, c, m float32) float64 {
	dst = dst[:len(x)]
	var e [8]float32
	for i := 0; i < len(x); i += 8 {
		v := x[i:min(i+8, len(x))]
		expChunk(&e, v, a, c)
		d := dst[i : i+len(v)]
		for k, ek := range e[:len(v)] {
			s[k] += float64(ek)
			d[k] = m * ek
		}
	}
	return s.total()
}

// sumExpAffine returns Σ_j expf(a·x[j] − c) in float64, as expAffine without the stores.
func sumExpAffine(x []float32, a, c float32) float64 {
	n, s := sumExpAffineSIMD(x, a, c)
	return sumExpAffineGo(&s, x[n:], a, c)
}

// sumExpAffineGo is sumExpAffine's scalar loop, continuing the lanes s as expAffineGo does.
func sumExpAffineGo(s *sum8, x []float32, a, c float32) float64 {
	var e [8]float32
	for i := 0; i < len(x); i += 8 {
		v := x[i:min(i+8, len(x))]
		expChunk(&e, v, a, c)
		for k, ek := range e[:len(v)] {
			s[k] += float64(ek)
		}
	}
	return s.total()
}

// expChunk sets e[k] = expf(a·v[k] − c) for the (at most eight) elements of v.
func expChunk(e *[8]float32, v []float32, a, c float32) {
	for k, xv := range v[:min(len(v), 8)] {
		z := float32(a*xv) - c
		if z >= expMin && z <= expMax {
			e[k] = expCore(z)
		} else {
			e[k] = expSlow(z)
		}
	}
}

// maxScaled returns max_j a·x[j] (the products are compared, whatever a's sign), −Inf for an
// empty x, NaN if any product is NaN. A zero maximum is returned as +0 whatever the signs of
// the zero products (the vector paths cannot tell them apart; callers only subtract it).
func maxScaled(x []float32, a float32) float32 {
	n, m := maxScaledSIMD(x, a)
	return maxScaledGo(m, x[n:], a)
}

// maxScaledGo returns max(m, max_j a·x[j]) with maxScaled's conventions: the scalar loop,
// continuing the vector paths' maximum m (−Inf if they did nothing).
func maxScaledGo(m float32, x []float32, a float32) float32 {
	m0, m1 := m, float32(math.Inf(-1))
	i := 0
	for ; i+2 <= len(x); i += 2 {
		v := x[i : i+2 : i+2]
		m0 = max(m0, a*v[0])
		m1 = max(m1, a*v[1])
	}
	if i < len(x) {
		m0 = max(m0, a*x[i])
	}
	return max(m0, m1) + 0 // −0 + 0 = +0
}
