package kernels

// Accumulation into 16-bit gradients: a contribution computed in float32 is added to a
// bfloat16 or float16 gradient with one rounding per element, dst = round(widen(dst) + src),
// the float32 sum rounded to nearest even (what `grad += g` does in PyTorch for a 16-bit
// grad and a float32 g). The conversions are F32ToBF16/BF16ToF32 and F32ToF16/F16ToF32, so
// the rounding is exactly theirs; the add is AddInto's float32 add.

// addRoundBlock is the number of elements converted at once through a stack buffer.
const addRoundBlock = 256

// AddRoundBF16 sets dst[i] = bf16(float32(dst[i]) + src[i]) for bfloat16 bits dst: the
// float32 sum of the exactly widened dst and src, rounded once to nearest even. Panics if
// len(dst) ≠ len(src). No heap allocation.
func AddRoundBF16(dst []uint16, src []float32) {
	needLen("AddRoundBF16", "src", len(src), len(dst), "len(dst)")
	addRound(dst, src, true)
}

// AddRoundF16 is AddRoundBF16 for IEEE binary16 bits dst: dst[i] = f16(float32(dst[i]) +
// src[i]), rounded once to nearest even (overflow to ±Inf).
func AddRoundF16(dst []uint16, src []float32) {
	needLen("AddRoundF16", "src", len(src), len(dst), "len(dst)")
	addRound(dst, src, false)
}

// addRound widens a block of dst, adds the block of src in float32 and rounds it back
// (bfloat16 when bf16, else binary16). Direct calls keep the block buffer on the stack.
func addRound(dst []uint16, src []float32, bf16 bool) {
	var buf [addRoundBlock]float32
	for lo := 0; lo < len(dst); lo += addRoundBlock {
		hi := min(lo+addRoundBlock, len(dst))
		b := buf[:hi-lo]
		if bf16 {
			BF16ToF32(b, dst[lo:hi])
		} else {
			F16ToF32(b, dst[lo:hi])
		}
		AddInto(b, src[lo:hi])
		if bf16 {
			F32ToBF16(dst[lo:hi], b)
		} else {
			F32ToF16(dst[lo:hi], b)
		}
	}
}
