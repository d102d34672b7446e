package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
	"github.com/x448/float16"
)

// refBF16 rounds f to bfloat16 by comparing the two neighbouring bf16 values' distances in
// float64 (ties to the even mantissa), independently of the kernel's bit trick.
func refBF16(f float32) uint16 {
	b := math.Float32bits(f)
	lo := uint16(b >> 16) // truncation toward zero: |lo| ≤ |f|
	hi := lo + 1          // next value away from zero (may become Inf)
	dl := math.Abs(float64(f) - float64(math.Float32frombits(uint32(lo)<<16)))
	hv := float64(math.Float32frombits(uint32(hi) << 16))
	if math.IsInf(hv, 0) {
		hv = math.Copysign(math.Ldexp(1, 128), hv) // IEEE: round as if the exponent were unbounded
	}
	dh := math.Abs(hv - float64(f))
	switch {
	case b&0xFFFF == 0:
		return lo
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	default:
		return hi
	}
}

// halfSamples returns float32 bit patterns: a stride over all of them, values near every
// bf16/f16 rounding boundary, and specials.
func halfSamples() []float32 {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 4093 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	g := rng.New(22)
	for i := 0; i < 20000; i++ {
		u := uint32(g.Uint64())
		// Exact ties and their neighbours for bf16 (low 16 bits 0x8000) and f16 (low 13 bits 0x1000).
		for _, lowBits := range []uint32{0x8000, 0x7FFF, 0x8001} {
			xs = append(xs, math.Float32frombits(u&^0xFFFF|lowBits))
		}
		for _, lowBits := range []uint32{0x1000, 0x0FFF, 0x1001} {
			xs = append(xs, math.Float32frombits(u&^0x1FFF|lowBits))
		}
	}
	inf := float32(math.Inf(1))
	xs = append(xs, 0, float32(math.Copysign(0, -1)), inf, -inf, float32(math.NaN()),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 65504, 65519.996, 65520, 1e-8, 5.960464477539063e-08,
		2.9802322387695312e-08, 2.98023259e-08, 6.103515625e-05, 6.1035156e-05)
	return xs
}

func TestBF16RoundTrip(t *testing.T) {
	xs := halfSamples()
	got := make([]uint16, len(xs))
	F32ToBF16(got, xs)
	back := make([]float32, len(xs))
	BF16ToF32(back, got)
	for i, f := range xs {
		if f != f {
			if back[i] == back[i] || got[i]&0x0040 == 0 || got[i]&0x8000 != uint16(math.Float32bits(f)>>16)&0x8000 {
				t.Fatalf("bf16(NaN %#08x) = %#04x: want a quiet NaN with the same sign", math.Float32bits(f), got[i])
			}
			continue
		}
		if want := refBF16(f); got[i] != want {
			t.Fatalf("bf16(%v = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got[i], want)
		}
		if math.Float32bits(back[i]) != uint32(got[i])<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %v", got[i], back[i])
		}
	}
	// A signalling NaN whose payload lives only in the low bits must not become Inf.
	snan := math.Float32frombits(0x7F800001)
	F32ToBF16(got[:1], []float32{snan})
	if got[0]&0x7F80 != 0x7F80 || got[0]&0x7F == 0 {
		t.Errorf("bf16(sNaN) = %#04x, want a NaN", got[0])
	}
}

func TestF16AgainstX448(t *testing.T) {
	xs := halfSamples()
	got := make([]uint16, len(xs))
	F32ToF16(got, xs)
	for i, f := range xs {
		if want := float16.Fromfloat32(f).Bits(); got[i] != want {
			t.Fatalf("f16(%v = %#08x) = %#04x, x448 %#04x", f, math.Float32bits(f), got[i], want)
		}
	}
	// Every binary16 value widens exactly.
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	wide := make([]float32, len(all))
	F16ToF32(wide, all)
	for i, h := range all {
		want := float16.Frombits(h).Float32()
		if math.Float32bits(wide[i]) != math.Float32bits(want) {
			t.Fatalf("F16ToF32(%#04x) = %v (%#08x), x448 %v (%#08x)", h, wide[i], math.Float32bits(wide[i]), want, math.Float32bits(want))
		}
	}
	// And narrowing them back is the identity (NaNs are quiet already or become quiet).
	narrow := make([]uint16, len(all))
	F32ToF16(narrow, wide)
	for i, h := range all {
		isNaN := h&0x7C00 == 0x7C00 && h&0x3FF != 0
		if !isNaN && narrow[i] != h || isNaN && narrow[i] != h|0x200 {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, narrow[i])
		}
	}
}

func TestHalfPanicsOnLength(t *testing.T) {
	mustPanic(t, "len(dst)", func() { F32ToBF16(make([]uint16, 1), make([]float32, 2)) })
	mustPanic(t, "len(dst)", func() { F16ToF32(make([]float32, 3), make([]uint16, 2)) })
}
