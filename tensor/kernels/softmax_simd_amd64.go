//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// dotWideSIMD is dotWide in sum8's lanes (zero padding adds +0).
func dotWideSIMD(a, b []float32) (float32, bool) {
	if !hasAVX2() {
		return 0, false
	}
	b = b[:len(a)]
	var lo, hi archsimd.Float64x4
	n := len(a) &^ 7
	for i := 0; i < n; i += 8 {
		al, ah := widen8(ld8(a, i))
		bl, bh := widen8(ld8(b, i))
		lo, hi = lo.Add(al.Mul(bl)), hi.Add(ah.Mul(bh)) // exact products
	}
	if n < len(a) {
		al, ah := widen8(part8(a, n))
		bl, bh := widen8(part8(b, n))
		lo, hi = lo.Add(al.Mul(bl)), hi.Add(ah.Mul(bh))
	}
	var acc8 sum8
	acc8.put4(lo, hi)
	archsimd.ClearAVXUpperBits() // before the scalar sum (package internal/asmcheck)
	s := acc8.total()
	return float32(s), true
}

// softmaxGradRowSIMD sets ds[j] = scale·p[j]·(dp[j] − d) as SoftmaxBackwardRows' scalar loop,
// for len(ds) = len(dp) = len(p); ds may alias dp exactly.
func softmaxGradRowSIMD(ds, p, dp []float32, scale, d float32) bool {
	if !hasAVX2() {
		return false
	}
	ds, dp = ds[:len(p)], dp[:len(p)]
	sv, dv := b8(scale), b8(d)
	n := len(p) &^ 7
	for i := 0; i < n; i += 8 {
		st8(sv.Mul(ld8(p, i)).Mul(ld8(dp, i).Sub(dv)), ds, i)
	}
	if n < len(p) {
		put8(sv.Mul(part8(p, n)).Mul(part8(dp, n).Sub(dv)), ds, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}
