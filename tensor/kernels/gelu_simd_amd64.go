//go:build goexperiment.simd && amd64

package kernels

import (
	"sync"

	"simd/archsimd"
)

// vgelu8 holds GELU's constants on eight lanes besides the exponential's.
type vgelu8 struct {
	e                vexp8
	a, b, k, kc, one archsimd.Float32x8 // geluA, geluB, geluK, geluK·geluC, 1
}

// init broadcasts the constants field by field, as vexp8.init.
func (g *vgelu8) init() {
	g.e.init()
	g.a, g.b, g.k, g.kc, g.one = b8(geluA), b8(geluB), b8(geluK), b8(geluK*geluC), b8(1)
	archsimd.ClearAVXUpperBits()
}

// forward returns geluForwardGo's y for eight lanes of x, and false if a lane's exponent is
// outside [expMin, expMax] (then the result is to be discarded).
func (g *vgelu8) forward(v archsimd.Float32x8) (archsimd.Float32x8, bool) {
	z := v.Mul(g.a.Add(g.b.Mul(v).Mul(v)))
	return v.Div(g.one.Add(g.e.core(z))), g.e.inRange(z)
}

// backward returns geluBackwardGo's dx for eight lanes of dy and x, and false as forward.
func (g *vgelu8) backward(dy, v archsimd.Float32x8) (archsimd.Float32x8, bool) {
	v2 := v.Mul(v)
	z := v.Mul(g.a.Add(g.b.Mul(v2)))
	e := g.e.core(z)
	s := g.one.Div(g.one.Add(e))
	d := s.Mul(g.one.Add(v.Mul(e.Mul(s)).Mul(g.k.Add(g.kc.Mul(v2)))))
	return dy.Mul(d), g.e.inRange(z)
}

// GELU's constants, built once per process on first use and read through a pointer (as
// vexp16Consts, and for the same reason).
var (
	vgelu8Consts  = sync.OnceValue(func() *vgelu8 { g := new(vgelu8); g.init(); return g })
	vgelu16Consts = sync.OnceValue(func() *vgelu16 { g := new(vgelu16); g.init(); return g })
)

// vgelu16 is vgelu8 on sixteen lanes.
type vgelu16 struct {
	e                vexp16
	a, b, k, kc, one archsimd.Float32x16
}

// init is vgelu8.init on sixteen lanes.
func (g *vgelu16) init() {
	g.e.init()
	g.a, g.b, g.k, g.kc, g.one = b16(geluA), b16(geluB), b16(geluK), b16(geluK*geluC), b16(1)
	archsimd.ClearAVXUpperBits()
}

func (g *vgelu16) forward(v archsimd.Float32x16) (archsimd.Float32x16, bool) {
	z := v.Mul(g.a.Add(g.b.Mul(v).Mul(v)))
	return v.Div(g.one.Add(g.e.core(z))), g.e.inRange(z)
}

func (g *vgelu16) backward(dy, v archsimd.Float32x16) (archsimd.Float32x16, bool) {
	v2 := v.Mul(v)
	z := v.Mul(g.a.Add(g.b.Mul(v2)))
	e := g.e.core(z)
	s := g.one.Div(g.one.Add(e))
	d := s.Mul(g.one.Add(v.Mul(e.Mul(s)).Mul(g.k.Add(g.kc.Mul(v2)))))
	return dy.Mul(d), g.e.inRange(z)
}

func geluForwardSIMD(y, x []float32) bool {
	switch {
	case hasAVX512():
		g := vgelu16Consts()
		geluForward16(g, y, x, nil)
	case hasAVX2():
		g := vgelu8Consts()
		geluForward8(g, y, x, nil)
	default:
		return false
	}
	archsimd.ClearAVXUpperBits()
	return true
}

func geluBackwardSIMD(dx, dy, x []float32) bool {
	switch {
	case hasAVX512():
		g := vgelu16Consts()
		geluBackward16(g, dx, dy, x, nil, nil)
	case hasAVX2():
		g := vgelu8Consts()
		geluBackward8(g, dx, dy, x, nil, nil)
	default:
		return false
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// biasGeluForwardSIMD is BiasGeluForward in one pass per row: u = x + bias is formed in
// registers (rounded to float32 as the scalar Add rounds it) and activated.
func biasGeluForwardSIMD(y, x, bias []float32, rows, cols int) bool {
	switch {
	case hasAVX512():
		g := vgelu16Consts()
		for r := 0; r < rows; r++ {
			geluForward16(g, y[r*cols:r*cols+cols], x[r*cols:r*cols+cols], bias)
		}
	case hasAVX2():
		g := vgelu8Consts()
		for r := 0; r < rows; r++ {
			geluForward8(g, y[r*cols:r*cols+cols], x[r*cols:r*cols+cols], bias)
		}
	default:
		return false
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// biasGeluBackwardSIMD is BiasGeluBackward in one pass per row: dx and dbias += dx (float32,
// in row order, as the scalar AddInto) from u = x + bias formed in registers.
func biasGeluBackwardSIMD(dx, dbias, dy, x, bias []float32, rows, cols int) bool {
	switch {
	case hasAVX512():
		g := vgelu16Consts()
		for r := 0; r < rows; r++ {
			lo, hi := r*cols, r*cols+cols
			geluBackward16(g, dx[lo:hi], dy[lo:hi], x[lo:hi], bias, dbias)
		}
	case hasAVX2():
		g := vgelu8Consts()
		for r := 0; r < rows; r++ {
			lo, hi := r*cols, r*cols+cols
			geluBackward8(g, dx[lo:hi], dy[lo:hi], x[lo:hi], bias, dbias)
		}
	default:
		return false
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// The row loops below take bias = nil for plain GELU, or bias (and for the backward dbias)
// of length len(x) for the fused bias add. A chunk with an exponent outside the polynomial's
// range goes through the scalar loop (geluChunkForward, geluChunkBackward).

// geluForward8 sets y = gelu(x + bias) over all of x on eight lanes (len(y) = len(x)).
func geluForward8(g *vgelu8, y, x, bias []float32) {
	y = y[:len(x)]
	if bias != nil {
		bias = bias[:len(x)]
	}
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		u := ld8(x, i)
		if bias != nil {
			u = u.Add(ld8(bias, i))
		}
		if v, ok := g.forward(u); ok {
			st8(v, y, i)
		} else {
			geluChunkForward(y[i:i+8], x[i:i+8], bias, i)
		}
	}
	if n < len(x) { // zero padding: gelu(0) is in range
		u := part8(x, n)
		if bias != nil {
			u = u.Add(part8(bias, n))
		}
		if v, ok := g.forward(u); ok {
			put8(v, y, n)
		} else {
			geluChunkForward(y[n:], x[n:], bias, n)
		}
	}
}

// geluBackward8 sets dx = dy·gelu'(x + bias) over all of x on eight lanes, and adds dx to
// dbias if bias is not nil.
func geluBackward8(g *vgelu8, dx, dy, x, bias, dbias []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	if bias != nil {
		bias, dbias = bias[:len(x)], dbias[:len(x)]
	}
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		u := ld8(x, i)
		if bias != nil {
			u = u.Add(ld8(bias, i))
		}
		v, ok := g.backward(ld8(dy, i), u)
		if !ok {
			geluChunkBackward(dx[i:i+8], dy[i:i+8], x[i:i+8], bias, i)
			v = ld8(dx, i)
		}
		st8(v, dx, i)
		if bias != nil {
			st8(ld8(dbias, i).Add(v), dbias, i)
		}
	}
	if n < len(x) {
		u := part8(x, n)
		if bias != nil {
			u = u.Add(part8(bias, n))
		}
		v, ok := g.backward(part8(dy, n), u)
		if !ok {
			geluChunkBackward(dx[n:], dy[n:], x[n:], bias, n)
			v = part8(dx, n)
		}
		put8(v, dx, n)
		if bias != nil {
			put8(part8(dbias, n).Add(v), dbias, n)
		}
	}
}

// geluForward16 is geluForward8 on sixteen lanes.
func geluForward16(g *vgelu16, y, x, bias []float32) {
	y = y[:len(x)]
	if bias != nil {
		bias = bias[:len(x)]
	}
	n := len(x) &^ 15
	for i := 0; i < n; i += 16 {
		u := ld16(x, i)
		if bias != nil {
			u = u.Add(ld16(bias, i))
		}
		if v, ok := g.forward(u); ok {
			st16(v, y, i)
		} else {
			geluChunkForward(y[i:i+16], x[i:i+16], bias, i)
		}
	}
	if n < len(x) {
		u := part16(x, n)
		if bias != nil {
			u = u.Add(part16(bias, n))
		}
		if v, ok := g.forward(u); ok {
			put16(v, y, n)
		} else {
			geluChunkForward(y[n:], x[n:], bias, n)
		}
	}
}

// geluBackward16 is geluBackward8 on sixteen lanes.
func geluBackward16(g *vgelu16, dx, dy, x, bias, dbias []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	if bias != nil {
		bias, dbias = bias[:len(x)], dbias[:len(x)]
	}
	n := len(x) &^ 15
	for i := 0; i < n; i += 16 {
		u := ld16(x, i)
		if bias != nil {
			u = u.Add(ld16(bias, i))
		}
		v, ok := g.backward(ld16(dy, i), u)
		if !ok {
			geluChunkBackward(dx[i:i+16], dy[i:i+16], x[i:i+16], bias, i)
			v = ld16(dx, i)
		}
		st16(v, dx, i)
		if bias != nil {
			st16(ld16(dbias, i).Add(v), dbias, i)
		}
	}
	if n < len(x) {
		u := part16(x, n)
		if bias != nil {
			u = u.Add(part16(bias, n))
		}
		v, ok := g.backward(part16(dy, n), u)
		if !ok {
			geluChunkBackward(dx[n:], dy[n:], x[n:], bias, n)
			v = part16(dx, n)
		}
		put16(v, dx, n)
		if bias != nil {
			put16(part16(dbias, n).Add(v), dbias, n)
		}
	}
}

// geluChunkForward is the scalar loop for one chunk (at most sixteen elements) at offset i
// of the row: y = gelu(x + bias[i:]) (bias may be nil).
//
// It is called from the vector loops and clears the upper halves first: its scalar code would
// otherwise stall on an Intel Xeon (package internal/asmcheck). Not inlined, so that the
// caller's vectors are saved around the call.
//
//go:noinline
func geluChunkForward(y, x, bias []float32, i int) {
	archsimd.ClearAVXUpperBits()
	var u [16]float32
	uc := u[:len(x)]
	copy(uc, x)
	if bias != nil {
		for j := range uc {
			uc[j] += bias[i+j]
		}
	}
	geluForwardGo(y, uc)
}

// geluChunkBackward is the scalar loop for one chunk at offset i of the row: dx = dy·gelu'(x +
// bias[i:]) (bias may be nil; dbias is left to the caller).
// It clears the upper halves first, as geluChunkForward.
//
//go:noinline
func geluChunkBackward(dx, dy, x, bias []float32, i int) {
	archsimd.ClearAVXUpperBits()
	var u [16]float32
	uc := u[:len(x)]
	copy(uc, x)
	if bias != nil {
		for j := range uc {
			uc[j] += bias[i+j]
		}
	}
	geluBackwardGo(dx, dy, uc)
}
