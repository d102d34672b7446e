//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// LayerNorm's loops on eight lanes, over whole rows (the last partial vector through part8
// and put8).

// rowSumsSIMD is rowSums in sum8's lanes. Padded lanes hold x[0], so x − k is 0 there.
func rowSumsSIMD(x []float32, k float64) (sum, sumSq float64, ok bool) {
	if !hasAVX2() {
		return 0, 0, false
	}
	kv := archsimd.BroadcastFloat64x4(k)
	var slo, shi, qlo, qhi archsimd.Float64x4
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		l, h := widen8(ld8(x, i))
		l, h = l.Sub(kv), h.Sub(kv)
		slo, shi = slo.Add(l), shi.Add(h)
		qlo, qhi = qlo.Add(l.Mul(l)), qhi.Add(h.Mul(h)) // rounded, then added, as the scalar loop
	}
	if n < len(x) {
		l, h := widen8(part8(x, n).Merge(b8(x[0]), first8(len(x)-n)))
		l, h = l.Sub(kv), h.Sub(kv)
		slo, shi = slo.Add(l), shi.Add(h)
		qlo, qhi = qlo.Add(l.Mul(l)), qhi.Add(h.Mul(h))
	}
	var s8, q8 sum8
	s8.put4(slo, shi)
	q8.put4(qlo, qhi)
	archsimd.ClearAVXUpperBits() // before the scalar sums (package internal/asmcheck)
	sum, sumSq = s8.total(), q8.total()
	return sum, sumSq, true
}

// layerNormRowSIMD sets y[j] = (x[j] − m)·rs·w[j] + b[j] as LayerNormForward's scalar loop.
func layerNormRowSIMD(y, x, w, b []float32, m, rs float32) bool {
	if !hasAVX2() {
		return false
	}
	y, w, b = y[:len(x)], w[:len(x)], b[:len(x)]
	mv, rv := b8(m), b8(rs)
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		st8(ld8(x, i).Sub(mv).Mul(rv).Mul(ld8(w, i)).Add(ld8(b, i)), y, i)
	}
	if n < len(x) {
		put8(part8(x, n).Sub(mv).Mul(rv).Mul(part8(w, n)).Add(part8(b, n)), y, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// layerNormGradSIMD is layerNormGradGo with the two sums in sum8's lanes. Padded lanes have
// dy = w = 0 and x = m, so they add +0.
func layerNormGradSIMD(dw, db, dy, x, w []float32, m, rs float32) (sumG, sumGX float64, ok bool) {
	if !hasAVX2() {
		return 0, 0, false
	}
	dy, w, dw, db = dy[:len(x)], w[:len(x)], dw[:len(x)], db[:len(x)]
	mv, rv := b8(m), b8(rs)
	var glo, ghi, gxlo, gxhi archsimd.Float64x4
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		dv := ld8(dy, i)
		xh := ld8(x, i).Sub(mv).Mul(rv)
		gl, gh := widen8(dv.Mul(ld8(w, i)))
		xl, xhh := widen8(xh)
		glo, ghi = glo.Add(gl), ghi.Add(gh)
		gxlo, gxhi = gxlo.Add(gl.Mul(xl)), gxhi.Add(gh.Mul(xhh)) // exact products
		st8(ld8(dw, i).Add(dv.Mul(xh)), dw, i)
		st8(ld8(db, i).Add(dv), db, i)
	}
	if n < len(x) {
		dv := part8(dy, n)
		xh := part8(x, n).Merge(mv, first8(len(x)-n)).Sub(mv).Mul(rv)
		gl, gh := widen8(dv.Mul(part8(w, n)))
		xl, xhh := widen8(xh)
		glo, ghi = glo.Add(gl), ghi.Add(gh)
		gxlo, gxhi = gxlo.Add(gl.Mul(xl)), gxhi.Add(gh.Mul(xhh))
		put8(part8(dw, n).Add(dv.Mul(xh)), dw, n)
		put8(part8(db, n).Add(dv), db, n)
	}
	var g8, gx8 sum8
	g8.put4(glo, ghi)
	gx8.put4(gxlo, gxhi)
	archsimd.ClearAVXUpperBits() // before the scalar sums (package internal/asmcheck)
	sumG, sumGX = g8.total(), gx8.total()
	return sumG, sumGX, true
}

// layerNormDxSIMD sets dx[j] = (g − mg − x̂·mgx)·rs as LayerNormBackward's scalar loop, with
// x̂ = (x[j] − m)·rs and g = dy[j]·w[j].
func layerNormDxSIMD(dx, dy, x, w []float32, m, rs, mg, mgx float32) bool {
	if !hasAVX2() {
		return false
	}
	dx, dy, w = dx[:len(x)], dy[:len(x)], w[:len(x)]
	mv, rv, mgv, mgxv := b8(m), b8(rs), b8(mg), b8(mgx)
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		xh := ld8(x, i).Sub(mv).Mul(rv)
		g := ld8(dy, i).Mul(ld8(w, i))
		st8(g.Sub(mgv).Sub(xh.Mul(mgxv)).Mul(rv), dx, i)
	}
	if n < len(x) {
		xh := part8(x, n).Sub(mv).Mul(rv)
		g := part8(dy, n).Mul(part8(w, n))
		put8(g.Sub(mgv).Sub(xh.Mul(mgxv)).Mul(rv), dx, n)
	}
	archsimd.ClearAVXUpperBits()
	return true
}
