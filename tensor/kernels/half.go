package kernels

import "math"

// Half-precision conversions: bf16 (bfloat16: float32's sign and exponent, 7 mantissa bits)
// and IEEE 754 binary16. Storage and communication types in gotron; compute stays float32.
// Each function converts len(src) values into dst (of another element type, so the two do
// not overlap) and panics if len(dst) ≠ len(src) (a programmer bug). They are bit manipulations on integers, so they behave the same on every platform.

// F32ToBF16 rounds each float32 to the nearest bfloat16, ties to even. Overflow rounds to
// ±Inf as IEEE rounding does; a NaN stays a NaN with its sign and top payload bits, made
// quiet (mantissa bit 6 set) so rounding can never turn it into an Inf.
func F32ToBF16(dst []uint16, src []float32) {
	needLen("F32ToBF16", "dst", len(dst), len(src), "len(src)")
	dst = dst[:len(src)]
	k := f32ToBF16SIMD(dst, src)
	dst, src = dst[k:], src[k:]
	for i, f := range src {
		b := math.Float32bits(f)
		if b&0x7FFFFFFF > 0x7F800000 { // NaN
			dst[i] = uint16(b>>16) | 0x0040
			continue
		}
		dst[i] = uint16((b + 0x7FFF + (b>>16)&1) >> 16)
	}
}

// BF16ToF32 widens each bfloat16 exactly: the 16 bits become float32's top half.
func BF16ToF32(dst []float32, src []uint16) {
	needLen("BF16ToF32", "dst", len(dst), len(src), "len(src)")
	dst = dst[:len(src)]
	k := bf16ToF32SIMD(dst, src)
	dst, src = dst[k:], src[k:]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

// F32ToF16 rounds each float32 to the nearest IEEE binary16, ties to even, with gradual
// underflow to subnormals (smallest 2^-24), overflow to ±Inf (from 65520 up), ±0 and ±Inf
// kept, and NaN kept as a quiet NaN with sign and top payload bits (mantissa bit 9 set), the
// same bits as github.com/x448/float16.Fromfloat32.
func F32ToF16(dst []uint16, src []float32) {
	needLen("F32ToF16", "dst", len(dst), len(src), "len(src)")
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = f32ToF16(math.Float32bits(f))
	}
}

// f32ToF16 converts one float32 bit pattern to binary16 bits.
func f32ToF16(b uint32) uint16 {
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7FFFFFFF
	switch {
	case a >= 0x7F800000: // Inf or NaN
		if a == 0x7F800000 {
			return sign | 0x7C00
		}
		return sign | 0x7E00 | uint16(a>>13)&0x3FF
	case a >= 0x477FF000: // ≥ 65520 = (2 − 2^-11)·2^15: rounds past the largest half
		return sign | 0x7C00
	case a >= 0x38800000: // ≥ 2^-14: normal half
		// Rebias the exponent (127 → 15) and round the 13 dropped bits to nearest even;
		// a carry out of the mantissa correctly bumps the exponent.
		a += 0x0FFF + (a>>13)&1
		return sign | uint16((a-0x38000000)>>13)
	case a > 0x33000000: // above 2^-25, half of the smallest subnormal: subnormal half
		e := a >> 23               // 102..112
		m := a&0x7FFFFF | 0x800000 // 24-bit significand
		shift := 126 - e           // value = m·2^(e−150) = (m >> shift) units of 2^-24
		q := m >> shift            // 14 ≤ shift ≤ 24
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | uint16(q)
	default: // ≤ 2^-25 rounds to zero (2^-25 itself is a tie, to even 0)
		return sign
	}
}

// F16ToF32 widens each IEEE binary16 exactly, subnormals included; a NaN keeps its sign and
// payload and is made quiet.
func F16ToF32(dst []float32, src []uint16) {
	needLen("F16ToF32", "dst", len(dst), len(src), "len(src)")
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = f16ToF32(h)
	}
}

// f16ToF32 converts one binary16 bit pattern to float32.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1F
	m := uint32(h & 0x3FF)
	switch e {
	case 0: // zero or subnormal: m·2^-24, exact in float32
		f := float32(m) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case 0x1F: // Inf, or NaN made quiet (as x86's vcvtph2ps and x448/float16 do)
		if m != 0 {
			m |= 0x200
		}
		return math.Float32frombits(sign | 0x7F800000 | m<<13)
	default:
		return math.Float32frombits(sign | (e+112)<<23 | m<<13)
	}
}
