//go:build goexperiment.simd && amd64

package kernels

import (
	"math"
	"sync"

	"simd/archsimd"
)

// expZero is the argument below which e^x rounds to +0 in float32 (e^-104 < 2^-150, half the
// smallest subnormal): expf returns exactly 0 there, and so may the vector paths.
const expZero = -104.0

// vexp8 holds expCore's constants broadcast to eight lanes; its methods are the vector
// exponential. One is built per process (vexp8Consts) and read through a pointer by the
// inlined methods.
type vexp8 struct {
	log2e, magic, c1, c2, p0, p1, p2, p3, p4, p5, one archsimd.Float32x8
	lo, hi, zero                                      archsimd.Float32x8 // expMin, expMax, expZero
}

// init broadcasts the constants field by field (a struct literal returned by value would be
// copied with legacy-SSE moves).
func (k *vexp8) init() {
	k.log2e, k.magic, k.c1, k.c2 = b8(expLog2e), b8(expMagic), b8(expC1), b8(expC2)
	k.p0, k.p1, k.p2, k.p3, k.p4, k.p5 = b8(expP0), b8(expP1), b8(expP2), b8(expP3), b8(expP4), b8(expP5)
	k.one, k.lo, k.hi, k.zero = b8(1), b8(expMin), b8(expMax), b8(expZero)
	archsimd.ClearAVXUpperBits()
}

// core is expCore on eight lanes, operation by operation.
func (k *vexp8) core(x archsimd.Float32x8) archsimd.Float32x8 {
	t := x.Mul(k.log2e).Add(k.magic)
	n := t.Sub(k.magic)
	r := x.Sub(n.Mul(k.c1)).Sub(n.Mul(k.c2))
	p := k.p0.Mul(r).Add(k.p1).Mul(r).Add(k.p2).Mul(r).Add(k.p3).Mul(r).Add(k.p4).Mul(r).Add(k.p5)
	y := p.Mul(r).Mul(r).Add(r).Add(k.one)
	return y.Mul(t.AsInt32x8().ShiftAllLeft(23).Add(k.one.AsInt32x8()).AsFloat32x8())
}

// inRange reports whether every lane of x is in [expMin, expMax] (false for a NaN lane).
func (k *vexp8) inRange(x archsimd.Float32x8) bool {
	return x.GreaterEqual(k.lo).And(x.LessEqual(k.hi)).ToBits() == 0xFF
}

// expf is expf on eight lanes: expCore when every lane is in range, else expfOutside8.
func (k *vexp8) expf(x archsimd.Float32x8) archsimd.Float32x8 {
	if k.inRange(x) {
		return k.core(x)
	}
	return expfOutside8(k, x)
}

// expfOutside8 is expf for a chunk with a lane outside [expMin, expMax]: lanes below expZero
// (−Inf among them: masked scores, padded vocabulary) are exactly 0 and the rest go through
// expCore; any other lane (NaN, above expMax, or in [expZero, expMin) where the result is
// subnormal) sends the chunk through the scalar expf.
//
//go:noinline
func expfOutside8(k *vexp8, x archsimd.Float32x8) archsimd.Float32x8 {
	in := x.GreaterEqual(k.lo).And(x.LessEqual(k.hi))
	if in.Or(x.Less(k.zero)).ToBits() == 0xFF {
		return k.core(x.Max(k.lo)).Masked(in)
	}
	var a [8]float32
	x.Store(&a)
	archsimd.ClearAVXUpperBits() // before the scalar loop; x is in a (package internal/asmcheck)
	for i, v := range a {
		a[i] = expf(v)
	}
	return archsimd.LoadFloat32x8(&a)
}

// The exponential's constants, broadcast once per process on first use (so only on a CPU that
// has the instructions) and read through a pointer. Built per call of a kernel, the struct was
// returned by value and copied with the compiler's legacy-SSE moves, which stall on an Intel
// Xeon while the vector registers' upper halves are dirty (package internal/asmcheck): on the
// attention's rows of a few hundred elements the copy cost more than the row.
var (
	vexp8Consts  = sync.OnceValue(func() *vexp8 { k := new(vexp8); k.init(); return k })
	vexp16Consts = sync.OnceValue(func() *vexp16 { k := new(vexp16); k.init(); return k })
)

// vexp16 is vexp8 on sixteen lanes (AVX-512).
type vexp16 struct {
	log2e, magic, c1, c2, p0, p1, p2, p3, p4, p5, one archsimd.Float32x16
	lo, hi, zero                                      archsimd.Float32x16
}

// init is vexp8.init on sixteen lanes.
func (k *vexp16) init() {
	k.log2e, k.magic, k.c1, k.c2 = b16(expLog2e), b16(expMagic), b16(expC1), b16(expC2)
	k.p0, k.p1, k.p2, k.p3, k.p4, k.p5 = b16(expP0), b16(expP1), b16(expP2), b16(expP3), b16(expP4), b16(expP5)
	k.one, k.lo, k.hi, k.zero = b16(1), b16(expMin), b16(expMax), b16(expZero)
	archsimd.ClearAVXUpperBits()
}

// core is expCore on sixteen lanes, operation by operation.
func (k *vexp16) core(x archsimd.Float32x16) archsimd.Float32x16 {
	t := x.Mul(k.log2e).Add(k.magic)
	n := t.Sub(k.magic)
	r := x.Sub(n.Mul(k.c1)).Sub(n.Mul(k.c2))
	p := k.p0.Mul(r).Add(k.p1).Mul(r).Add(k.p2).Mul(r).Add(k.p3).Mul(r).Add(k.p4).Mul(r).Add(k.p5)
	y := p.Mul(r).Mul(r).Add(r).Add(k.one)
	return y.Mul(t.AsInt32x16().ShiftAllLeft(23).Add(k.one.AsInt32x16()).AsFloat32x16())
}

// inRange reports whether every lane of x is in [expMin, expMax] (false for a NaN lane). The
// two masks are combined as bits: Mask32x16.And compiles to three vector instructions.
func (k *vexp16) inRange(x archsimd.Float32x16) bool {
	return x.GreaterEqual(k.lo).ToBits()&x.LessEqual(k.hi).ToBits() == 0xFFFF
}

// expf is expf on sixteen lanes, as vexp8.expf.
func (k *vexp16) expf(x archsimd.Float32x16) archsimd.Float32x16 {
	if k.inRange(x) {
		return k.core(x)
	}
	return expfOutside16(k, x)
}

// expfOutside16 is expfOutside8 on sixteen lanes.
//
//go:noinline
func expfOutside16(k *vexp16, x archsimd.Float32x16) archsimd.Float32x16 {
	in := x.GreaterEqual(k.lo).And(x.LessEqual(k.hi))
	if in.Or(x.Less(k.zero)).ToBits() == 0xFFFF {
		return k.core(x.Max(k.lo)).Masked(in)
	}
	var a [16]float32
	x.Store(&a)
	archsimd.ClearAVXUpperBits() // before the scalar loop; x is in a (package internal/asmcheck)
	for i, v := range a {
		a[i] = expf(v)
	}
	return archsimd.LoadFloat32x16(&a)
}

func expAffineSIMD(dst, x []float32, a, c, m float32) (float64, bool) {
	switch {
	case hasAVX512():
		return expAffine16(dst, x, a, c, m, true), true
	case hasAVX2():
		return expAffine8(dst, x, a, c, m, true), true
	}
	return 0, false
}

func sumExpAffineSIMD(x []float32, a, c float32) (float64, bool) {
	switch {
	case hasAVX512():
		return expAffine16(nil, x, a, c, 0, false), true
	case hasAVX2():
		return expAffine8(nil, x, a, c, 0, false), true
	}
	return 0, false
}

// expAffine8 is expAffine (store = true: dst[j] = m·e_j; len(dst) ≥ len(x)) or sumExpAffine
// (store = false, dst unused) on eight lanes: it returns Σ e_j, e_j = expf(a·x[j] − c), in
// sum8's lanes.
func expAffine8(dst, x []float32, a, c, m float32, store bool) float64 {
	k := vexp8Consts()
	av, cv, mv := b8(a), b8(c), b8(m)
	var lo, hi archsimd.Float64x4
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		e := k.expf(ld8(x, i).Mul(av).Sub(cv))
		l, h := widen8(e)
		lo, hi = lo.Add(l), hi.Add(h)
		if store {
			st8(e.Mul(mv), dst, i)
		}
	}
	if n < len(x) {
		// Padded lanes get the exponent 0 (in range) and are masked out of the sum; a lane
		// starts at +0 and never becomes −0, so adding +0 leaves it unchanged.
		valid := first8(len(x) - n)
		var zero archsimd.Float32x8
		e := k.expf(part8(x, n).Mul(av).Sub(cv).Merge(zero, valid)).Masked(valid)
		l, h := widen8(e)
		lo, hi = lo.Add(l), hi.Add(h)
		if store {
			put8(e.Mul(mv), dst[:len(x)], n)
		}
	}
	var acc8 sum8
	acc8.put4(lo, hi)
	archsimd.ClearAVXUpperBits() // before the scalar sum (package internal/asmcheck)
	s := acc8.total()
	return s
}

// expAffine16 is expAffine8 on sixteen lanes. Lanes 0–7 and then 8–15 of each vector are
// added to one Float64x8 accumulator, which keeps sum8's lanes (element j in lane j mod 8).
func expAffine16(dst, x []float32, a, c, m float32, store bool) float64 {
	k := vexp16Consts()
	av, cv, mv := b16(a), b16(c), b16(m)
	var acc archsimd.Float64x8
	n := len(x) &^ 15
	for i := 0; i < n; i += 16 {
		e := k.expf(ld16(x, i).Mul(av).Sub(cv))
		acc = acc.Add(e.GetLo().ConvertToFloat64()).Add(e.GetHi().ConvertToFloat64())
		if store {
			st16(e.Mul(mv), dst, i)
		}
	}
	if n < len(x) {
		valid := first16(len(x) - n)
		var zero archsimd.Float32x16
		z := part16(x, n).Mul(av).Sub(cv).Merge(zero, valid)
		e := k.expf(z).Masked(valid)
		acc = acc.Add(e.GetLo().ConvertToFloat64()).Add(e.GetHi().ConvertToFloat64())
		if store {
			put16(e.Mul(mv), dst[:len(x)], n)
		}
	}
	var acc8 sum8
	acc8.put8(acc)
	archsimd.ClearAVXUpperBits() // before the scalar sum (package internal/asmcheck)
	s := acc8.total()
	return s
}

func maxScaledSIMD(x []float32, a float32) (float32, bool) {
	switch {
	case hasAVX512():
		return maxScaled16(x, a), true
	case hasAVX2():
		return maxScaled8(x, a), true
	}
	return 0, false
}

// The maxima are taken on the float32 bits mapped to int32 so that integer order is float
// order with −0 < +0 (Go's max, unlike VMAXPS, returns +0 for max(−0, +0)): a negative
// float's magnitude bits are flipped. The map is its own inverse. NaN products, which VMAXPS
// would not propagate either, are tracked in a mask.

// ordered8 maps eight floats' bits to int32 in float order (−0 < +0).
func ordered8(v archsimd.Int32x8) archsimd.Int32x8 {
	return v.Xor(v.ShiftAllRight(31).And(archsimd.BroadcastInt32x8(0x7FFFFFFF)))
}

// ordered16 is ordered8 on sixteen lanes.
func ordered16(v archsimd.Int32x16) archsimd.Int32x16 {
	return v.Xor(v.ShiftAllRight(31).And(archsimd.BroadcastInt32x16(0x7FFFFFFF)))
}

// maxScaled8 is maxScaled on eight lanes.
func maxScaled8(x []float32, a float32) float32 {
	av, ninf := b8(a), b8(float32(math.Inf(-1)))
	mx := ordered8(ninf.AsInt32x8())
	var nan archsimd.Mask32x8
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		p := ld8(x, i).Mul(av)
		nan = nan.Or(p.IsNaN())
		mx = mx.Max(ordered8(p.AsInt32x8()))
	}
	if n < len(x) {
		p := part8(x, n).Mul(av).Merge(ninf, first8(len(x)-n))
		nan = nan.Or(p.IsNaN())
		mx = mx.Max(ordered8(p.AsInt32x8()))
	}
	// The NaN flag goes to memory with the maxima, so that the compiler computes it before
	// ClearAVXUpperBits (it moved a pure ToBits after it, reloading the mask into a vector
	// register, package internal/asmcheck).
	var l [9]int32
	mx.Store((*[8]int32)(l[:8]))
	l[8] = int32(nan.ToBits())
	archsimd.ClearAVXUpperBits()
	if l[8] != 0 {
		return float32(math.NaN())
	}
	return unordered(max(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]))
}

// maxScaled16 is maxScaled on sixteen lanes.
func maxScaled16(x []float32, a float32) float32 {
	av, ninf := b16(a), b16(float32(math.Inf(-1)))
	mx := ordered16(ninf.AsInt32x16())
	var nan archsimd.Mask32x16
	n := len(x) &^ 15
	for i := 0; i < n; i += 16 {
		p := ld16(x, i).Mul(av)
		nan = nan.Or(p.IsNaN())
		mx = mx.Max(ordered16(p.AsInt32x16()))
	}
	if n < len(x) {
		p := part16(x, n).Mul(av).Merge(ninf, first16(len(x)-n))
		nan = nan.Or(p.IsNaN())
		mx = mx.Max(ordered16(p.AsInt32x16()))
	}
	var l [17]int32 // the maxima and the NaN flag, as maxScaled8
	mx.Store((*[16]int32)(l[:16]))
	l[16] = int32(nan.ToBits())
	archsimd.ClearAVXUpperBits()
	if l[16] != 0 {
		return float32(math.NaN())
	}
	return unordered(max(max(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]),
		max(l[8], l[9], l[10], l[11], l[12], l[13], l[14], l[15])))
}

// unordered inverts ordered8 for one value.
func unordered(o int32) float32 {
	b := uint32(o)
	if o < 0 {
		b ^= 0x7FFFFFFF
	}
	return math.Float32frombits(b)
}
