//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// The vector SwiGLU rows: with s = 1/(1 + e^(−g)) formed as the scalar sigmoid forms it (the
// same exponential polynomial, the same operation order), each lane gives the scalar loop's
// bits. A chunk whose exponent leaves [expMin, expMax] is redone by the scalar loop.

// swigluRowSIMD sets y = g·s·up over one row (len(y) = len(gate) = len(up)).
func swigluRowSIMD(y, gate, up []float32) bool {
	switch {
	case hasAVX512():
		e := vexp16Consts()
		one := e.one
		var zero archsimd.Float32x16 // b16(0) in the loop would be a legacy XORPS there (package asmcheck)
		n := len(gate) &^ 15
		for i := 0; i < n; i += 16 {
			g := ld16(gate, i)
			z := zero.Sub(g)
			if !e.inRange(z) {
				swigluForwardScalar(y[i:i+16], gate[i:i+16], up[i:i+16])
				continue
			}
			s := one.Div(one.Add(e.core(z)))
			st16(g.Mul(s).Mul(ld16(up, i)), y, i)
		}
		swigluForwardScalar(y[n:], gate[n:], up[n:])
	case hasAVX2():
		e := vexp8Consts()
		one := e.one
		var zero archsimd.Float32x8
		n := len(gate) &^ 7
		for i := 0; i < n; i += 8 {
			g := ld8(gate, i)
			z := zero.Sub(g)
			if !e.inRange(z) {
				swigluForwardScalar(y[i:i+8], gate[i:i+8], up[i:i+8])
				continue
			}
			s := one.Div(one.Add(e.core(z)))
			st8(g.Mul(s).Mul(ld8(up, i)), y, i)
		}
		swigluForwardScalar(y[n:], gate[n:], up[n:])
	default:
		return false
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// swigluGradRowSIMD sets dup = dy·g·s and dg = dy·up·(s·(1 + g·(1 − s))) over one row.
func swigluGradRowSIMD(dg, dup, dy, gate, up []float32) bool {
	switch {
	case hasAVX512():
		e := vexp16Consts()
		one := e.one
		var zero archsimd.Float32x16 // b16(0) in the loop would be a legacy XORPS there (package asmcheck)
		n := len(gate) &^ 15
		for i := 0; i < n; i += 16 {
			g := ld16(gate, i)
			z := zero.Sub(g)
			if !e.inRange(z) {
				swigluBackwardScalar(dg[i:i+16], dup[i:i+16], dy[i:i+16], gate[i:i+16], up[i:i+16])
				continue
			}
			s := one.Div(one.Add(e.core(z)))
			d := ld16(dy, i)
			st16(d.Mul(g).Mul(s), dup, i)
			st16(d.Mul(ld16(up, i)).Mul(s.Mul(one.Add(g.Mul(one.Sub(s))))), dg, i)
		}
		swigluBackwardScalar(dg[n:], dup[n:], dy[n:], gate[n:], up[n:])
	case hasAVX2():
		e := vexp8Consts()
		one := e.one
		var zero archsimd.Float32x8
		n := len(gate) &^ 7
		for i := 0; i < n; i += 8 {
			g := ld8(gate, i)
			z := zero.Sub(g)
			if !e.inRange(z) {
				swigluBackwardScalar(dg[i:i+8], dup[i:i+8], dy[i:i+8], gate[i:i+8], up[i:i+8])
				continue
			}
			s := one.Div(one.Add(e.core(z)))
			d := ld8(dy, i)
			st8(d.Mul(g).Mul(s), dup, i)
			st8(d.Mul(ld8(up, i)).Mul(s.Mul(one.Add(g.Mul(one.Sub(s))))), dg, i)
		}
		swigluBackwardScalar(dg[n:], dup[n:], dy[n:], gate[n:], up[n:])
	default:
		return false
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// swigluForwardScalar and swigluBackwardScalar are the scalar loops for the chunks the vector
// loops leave (out of the exponential's range, and the tails), called from those loops: they
// clear the upper halves first, as geluChunkForward, and are not inlined so that the
// caller's vectors are saved around the call.
//
//go:noinline
func swigluForwardScalar(y, gate, up []float32) {
	archsimd.ClearAVXUpperBits()
	swigluForwardGo(y, gate, up)
}

//go:noinline
func swigluBackwardScalar(dg, dup, dy, gate, up []float32) {
	archsimd.ClearAVXUpperBits()
	swigluBackwardGo(dg, dup, dy, gate, up)
}
