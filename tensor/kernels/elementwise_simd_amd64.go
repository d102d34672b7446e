//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// The elementwise kernels on eight lanes (they are bound by memory bandwidth, so sixteen
// lanes would not help). Each covers the whole slice, the last partial vector through
// part8 and put8.

func addIntoSIMD(dst, a []float32) bool {
	if !hasAVX2() {
		return false
	}
	a = a[:len(dst)]
	n := len(dst) &^ 7
	for i := 0; i < n; i += 8 {
		st8(ld8(dst, i).Add(ld8(a, i)), dst, i)
	}
	if n < len(dst) {
		put8(part8(dst, n).Add(part8(a, n)), dst, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}

func addSIMD(dst, a, b []float32) bool {
	if !hasAVX2() {
		return false
	}
	a, b = a[:len(dst)], b[:len(dst)]
	n := len(dst) &^ 7
	for i := 0; i < n; i += 8 {
		st8(ld8(a, i).Add(ld8(b, i)), dst, i)
	}
	if n < len(dst) {
		put8(part8(a, n).Add(part8(b, n)), dst, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}

func scaleSIMD(x []float32, s float32) bool {
	if !hasAVX2() {
		return false
	}
	sv := b8(s)
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		st8(ld8(x, i).Mul(sv), x, i)
	}
	if n < len(x) {
		put8(part8(x, n).Mul(sv), x, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}

func axpySIMD(dst []float32, alpha float32, x []float32) bool {
	if !hasAVX2() {
		return false
	}
	x = x[:len(dst)]
	av := b8(alpha)
	n := len(dst) &^ 7
	for i := 0; i < n; i += 8 {
		st8(ld8(dst, i).Add(av.Mul(ld8(x, i))), dst, i)
	}
	if n < len(dst) {
		put8(part8(dst, n).Add(av.Mul(part8(x, n))), dst, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// sumSquaresSIMD is SumSquares in sum8's lanes (zero padding adds +0).
func sumSquaresSIMD(x []float32) (float64, bool) {
	if !hasAVX2() {
		return 0, false
	}
	var lo, hi archsimd.Float64x4
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		l, h := widen8(ld8(x, i))
		lo, hi = lo.Add(l.Mul(l)), hi.Add(h.Mul(h)) // exact squares
	}
	if n < len(x) {
		l, h := widen8(part8(x, n))
		lo, hi = lo.Add(l.Mul(l)), hi.Add(h.Mul(h))
	}
	var acc8 sum8
	acc8.put4(lo, hi)
	archsimd.ClearAVXUpperBits() // before the scalar sum (package internal/asmcheck)
	s := acc8.total()
	return s, true
}

// columnSumSIMD is one column block of ColumnSumInto: a[j] += float64(x[c0 + r·cols + j]) for
// each row r in order, then d[j] = float32(float64(d[j]) + a[j]), for len(a) = len(d)
// columns: every column sums in the scalar loop's order.
func columnSumSIMD(d []float32, a []float64, x []float32, c0, rows, cols int) bool {
	if !hasAVX2() {
		return false
	}
	d = d[:len(a)]
	n := len(a) &^ 7
	for r := 0; r < rows; r++ {
		xr := x[r*cols+c0 : r*cols+c0+len(a)]
		for i := 0; i < n; i += 8 {
			l, h := widen8(ld8(xr, i))
			pl, ph := (*[4]float64)(a[i:i+4]), (*[4]float64)(a[i+4:i+8])
			archsimd.LoadFloat64x4(pl).Add(l).Store(pl)
			archsimd.LoadFloat64x4(ph).Add(h).Store(ph)
		}
		if n < len(a) {
			// Scalar code after vector code: clear the upper halves
			// first (package asmcheck).
			archsimd.ClearAVXUpperBits()
			for j := n; j < len(a); j++ {
				a[j] += float64(xr[j])
			}
		}
	}
	for i := 0; i < n; i += 8 {
		l, h := widen8(ld8(d, i))
		l = l.Add(archsimd.LoadFloat64x4((*[4]float64)(a[i : i+4])))
		h = h.Add(archsimd.LoadFloat64x4((*[4]float64)(a[i+4 : i+8])))
		st8(narrow8(l, h), d, i)
	}
	archsimd.ClearAVXUpperBits() // before the scalar tail (package internal/asmcheck)
	for j := n; j < len(a); j++ {
		d[j] = float32(float64(d[j]) + a[j])
	}
	return true
}
