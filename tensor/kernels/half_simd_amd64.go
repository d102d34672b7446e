//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// The bfloat16 conversions on sixteen AVX-512 lanes, the same integer
// arithmetic as the scalar loops (so the same bits): rounding adds 0x7FFF
// plus the kept mantissa's lowest bit and keeps the top half; a NaN keeps
// its top half with the quiet bit set. The tail runs through the scalar
// loop.
//
// f32ToBF16SIMD shifts by a vector of 16s (VPSRLVD) rather than by a
// count (ShiftAllRight): for the count form the compiler loads 16 into an
// XMM register with a legacy-SSE MOVQ inside the loop, and on an Intel
// Xeon with AMX an SSE instruction among dirty AVX-512 registers stalled
// each iteration: 0.7 GB/s instead of 26 (BenchmarkF32ToBF16, 2026-11-28).
// TestNoLegacySSEWhileDirty keeps such instructions out of the kernels.

func f32ToBF16SIMD(dst []uint16, src []float32) int {
	if !hasAVX512() {
		return 0
	}
	n := len(src) &^ 15
	dst = dst[:len(src)]
	bias, one, half := archsimd.BroadcastUint32x16(0x7FFF), archsimd.BroadcastUint32x16(1), archsimd.BroadcastUint32x16(16)
	abs, inf, quiet := archsimd.BroadcastUint32x16(0x7FFFFFFF), archsimd.BroadcastUint32x16(0x7F800000), archsimd.BroadcastUint32x16(0x00400000)
	for i := 0; i < n; i += 16 {
		b := archsimd.LoadFloat32x16((*[16]float32)(src[i : i+16])).AsUint32x16()
		r := b.Add(bias).Add(b.ShiftRight(half).And(one))
		nan := b.And(abs).Greater(inf)
		r = b.Or(quiet).Merge(r, nan) // NaN lanes keep b|quiet, the others r
		r.ShiftRight(half).TruncateToUint16().Store((*[16]uint16)(dst[i : i+16]))
	}
	archsimd.ClearAVXUpperBits()
	return n
}

func bf16ToF32SIMD(dst []float32, src []uint16) int {
	if !hasAVX512() {
		return 0
	}
	n := len(src) &^ 15
	dst = dst[:len(src)]
	for i := 0; i < n; i += 16 {
		h := archsimd.LoadUint16x16((*[16]uint16)(src[i : i+16]))
		h.ExtendToUint32().ShiftAllLeft(16).AsFloat32x16().Store((*[16]float32)(dst[i : i+16]))
	}
	archsimd.ClearAVXUpperBits()
	return n
}
