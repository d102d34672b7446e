//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// Vector paths. Built with GOEXPERIMENT=simd on amd64, the hot loops run on simd/archsimd
// vectors. A kernel first calls its hook (fooSIMD); the hook does the whole job and reports
// true, or reports false and the kernel runs its scalar loop. Each hook picks its width per
// call from archsimd.X86, whose CPU features the runtime detects once at start-up and never
// changes, so the choice is a read-only function of the machine (no package state):
//
//   - AVX-512 (F, CD, BW, DQ, VL): 16 float32 lanes (Float32x16, Float64x8) for the
//     exponential kernels (GELU and BiasGELU with the bias add fused, the exp loops of softmax
//     and cross entropy, the row maximum); 8 lanes for the rest, which are bound by memory
//     bandwidth, not arithmetic.
//   - AVX2 with FMA: 8 lanes (Float32x8, two Float64x4) everywhere.
//   - otherwise: no vector path; the hook reports false.
//
// The last partial vector of a slice is loaded zero-padded and stored partially (part8,
// put8); padded lanes are masked out of sums and maxima. So every element goes through the
// same arithmetic whatever its position, and results do not depend on how a caller splits
// its slices.
//
// # Same bits as the scalar loops
//
// Elementwise results equal the scalar loops' bit for bit (NaN payloads aside): each vector
// operation is the scalar expression's operation in the same order with the same rounding as
// the Go compiler emits it for the default GOAMD64=v1 (products rounded before they are
// added: no fused multiply-add in float32); the exponential is expCore's Cephes reduction and
// polynomial step by step; division and square root are IEEE (VDIVPS, VSQRTPS); AdamStep's
// float64 fma is VFMADD…PD on exactly widened operands, as math.FMA. A chunk with a lane whose
// exponent is outside expCore's range [expMin, expMax] is routed as the scalar loop routes
// it: lanes below expZero (−Inf among them: masked scores, padded vocabulary) are exactly 0
// as expf returns, and any other such lane (NaN, overflow, subnormal results, GELU's far
// tails) sends its chunk through the scalar code. maxScaled compares in an integer order in
// which −0 < +0, so its ±0 and NaN results are Go's max's. This covers GELU, BiasGELU, Add,
// AddInto, Scale, Axpy, the softmax and cross-entropy probabilities given their normalizers,
// LayerNorm's y and dx given the row statistics, ColumnSumInto (each column summed in row
// order) and AdamStep, which thus still equals torch bit for bit.
//
// # Float64 reductions: eight lanes
//
// The float64 sums (log-sum-exp, LayerNorm's row statistics and backward sums, softmax
// backward's row dot products, SumSquares) add element j into lane j mod 8, in index order,
// and combine the lanes as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)) (see sum8). The AVX2
// and AVX-512 paths keep exactly these lanes (two Float64x4; one Float64x8 that takes lanes
// 0–7 then 8–15 of a sixteen-lane vector), so they agree bit for bit with each other. The
// scalar loops use two or four lanes, so a sum may differ from the scalar build's in its last
// float64 bits (the rounding error of either order is about len·2^-53 relative); a float32
// quantity rounded from it (lse, loss, mean, rstd, LayerNorm backward's mean gradients,
// softmax backward's row dot) then differs by at most one ulp, rarely, and the outputs
// computed from it accordingly. Every accuracy test of the package (against float64
// references and against PyTorch) runs in both builds with the same tolerances.
//
// With GOAMD64=v3 the compiler may fuse the scalar loops' own multiply-adds (the Go spec
// allows it; AdamStep's explicit conversions forbid it), so the scalar build and the scalar
// fallback chunks may then differ from the vector paths in last bits; the bit-for-bit tests
// skip those kernels in that configuration.
//
// The functions end with archsimd.ClearAVXUpperBits (VZEROUPPER), which the Go compiler does
// not yet emit, so that the scalar SSE code that follows pays no AVX transition penalty.

// hasAVX512 reports whether the 16-lane paths may run.
func hasAVX512() bool { return archsimd.X86.AVX512() }

// hasAVX2 reports whether the 8-lane paths may run: AVX2 and FMA (every AVX-512 CPU has both).
func hasAVX2() bool { return archsimd.X86.AVX2() && archsimd.X86.FMA() }

// sum8 holds the eight float64 lanes of a vector reduction (element j in lane j mod 8).
type sum8 [8]float64

// total combines the lanes as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)): a vector of eight
// folded in halves.
func (s *sum8) total() float64 {
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

// put4 stores two Float64x4 accumulators (lanes 0–3 and 4–7) into s, and put8 a Float64x8
// one. A kernel stores its accumulators, clears the vector registers' upper halves
// (archsimd.ClearAVXUpperBits: no vector value is live after it) and only then sums the lanes
// with s.total, whose scalar (legacy-SSE) additions would otherwise each stall on an Intel
// Xeon while the upper halves are dirty (package internal/asmcheck).
func (s *sum8) put4(lo, hi archsimd.Float64x4) {
	lo.Store((*[4]float64)(s[0:4]))
	hi.Store((*[4]float64)(s[4:8]))
}

func (s *sum8) put8(a archsimd.Float64x8) { a.Store((*[8]float64)(s)) }

// b8 and b16 broadcast a float32 to every lane.
func b8(v float32) archsimd.Float32x8   { return archsimd.BroadcastFloat32x8(v) }
func b16(v float32) archsimd.Float32x16 { return archsimd.BroadcastFloat32x16(v) }

// ld8 and st8 load and store the eight float32 at s[i:i+8].
func ld8(s []float32, i int) archsimd.Float32x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(s[i : i+8]))
}
func st8(v archsimd.Float32x8, s []float32, i int) { v.Store((*[8]float32)(s[i : i+8])) }

// ld16 and st16 load and store the sixteen float32 at s[i:i+16].
func ld16(s []float32, i int) archsimd.Float32x16 {
	return archsimd.LoadFloat32x16((*[16]float32)(s[i : i+16]))
}
func st16(v archsimd.Float32x16, s []float32, i int) { v.Store((*[16]float32)(s[i : i+16])) }

// part8 loads s[i:] (fewer than eight elements) zero-padded; put8 stores the first len(s)−i
// lanes of v there. They go through a stack buffer rather than archsimd's SlicePart forms,
// whose masked access converts &s[0] to a pointer to a whole vector and so fails the
// race detector's checkptr test ("converted pointer straddles multiple allocations") at
// the end of an allocation. The buffer is filled and emptied by a loop of 32-bit integer
// moves (bits32), not by copy: runtime.memmove moves 16 to 128 bytes with legacy-SSE
// instructions, which stalled on an Intel Xeon with the upper halves dirty, and a third of a
// causal softmax row's time went to its tail (package internal/asmcheck does not see into
// the runtime).
func part8(s []float32, i int) archsimd.Float32x8 {
	var b [8]uint32
	moveBits(b[:], bits32(s[i:]))
	return archsimd.LoadUint32x8(&b).AsFloat32x8()
}
func put8(v archsimd.Float32x8, s []float32, i int) {
	var b [8]uint32
	v.AsUint32x8().Store(&b)
	moveBits(bits32(s[i:]), b[:])
}

// part16 and put16 are part8 and put8 for sixteen lanes.
func part16(s []float32, i int) archsimd.Float32x16 {
	var b [16]uint32
	moveBits(b[:], bits32(s[i:]))
	return archsimd.LoadUint32x16(&b).AsFloat32x16()
}
func put16(v archsimd.Float32x16, s []float32, i int) {
	var b [16]uint32
	v.AsUint32x16().Store(&b)
	moveBits(bits32(s[i:]), b[:])
}

// bits32 returns s's storage as uint32 (the float32 bits, not copied).
func bits32(s []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// moveBits copies min(len(dst), len(src)) elements one integer move at a time.
func moveBits(dst, src []uint32) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for j := range dst {
		dst[j] = src[j]
	}
}

// widen8 returns v's lanes 0–3 and 4–7 as float64 (exact).
func widen8(v archsimd.Float32x8) (lo, hi archsimd.Float64x4) {
	return v.GetLo().ConvertToFloat64(), v.GetHi().ConvertToFloat64()
}

// narrow8 rounds two float64 halves to one float32 vector.
func narrow8(lo, hi archsimd.Float64x4) archsimd.Float32x8 {
	var v archsimd.Float32x8
	return v.SetLo(lo.ConvertToFloat32()).SetHi(hi.ConvertToFloat32())
}

// first8 returns a mask of the first n lanes, 0 ≤ n ≤ 8 (a comparison: AVX2 has no mask
// registers).
func first8(n int) archsimd.Mask32x8 {
	iota := archsimd.LoadInt32x8(&[8]int32{0, 1, 2, 3, 4, 5, 6, 7})
	return iota.Less(archsimd.BroadcastInt32x8(int32(n)))
}

// first16 returns a mask of the first n lanes, 0 ≤ n ≤ 16.
func first16(n int) archsimd.Mask32x16 {
	return archsimd.Mask32x16FromBits(uint16(1<<n - 1))
}
