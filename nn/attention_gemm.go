package nn

import (
	"fmt"

	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/dnnl"
	"github.com/gotron/gotron/tensor/kernels"
)

// operand is a GEMM operand of the attention core: float32 values (f), or
// bfloat16 bits (h) for a bfloat16 model. A float16 model's operands are
// float32 values already rounded to float16, so its GEMMs run on the float32
// BLAS with a float16 GEMM's values.
type operand struct {
	f []float32
	h []uint16
}

// at returns the operand from element i on.
func (o operand) at(i int) operand {
	if o.h != nil {
		return operand{h: o.h[i:]}
	}
	return operand{f: o.f[i:]}
}

// packRows copies rows rows of width w and row stride ld, from o on, into
// buf densely (row stride w) and returns buf: the attention core's GEMMs
// then read one (batch row, head)'s Q, K and V (or dO) from a few hundred
// contiguous kilobytes that stay in cache, instead of rows spread over the
// whole qkv tensor. bfloat16 bits packed into a float32 buf are widened.
func (o operand) packRows(buf operand, rows, w, ld int) operand {
	for r := range rows {
		switch {
		case o.h != nil && buf.h != nil:
			copy(buf.h[r*w:(r+1)*w], o.h[r*ld:r*ld+w])
		case o.h != nil:
			kernels.BF16ToF32(buf.f[r*w:(r+1)*w], o.h[r*ld:r*ld+w])
		default:
			copy(buf.f[r*w:(r+1)*w], o.f[r*ld:r*ld+w])
		}
	}
	return buf
}

// newOperand returns an operand of n elements of the attention's GEMM
// precision (bfloat16 bits for the native bfloat16 GEMM, else float32).
func (f *attentionFn) newOperand(n int) operand {
	if f.dtype == tensor.BFloat16 && !f.wide {
		return operand{h: make([]uint16, n)}
	}
	return operand{f: make([]float32, n)}
}

// gemm sets c (m×n, row stride ldc) to op(a)·op(b), accumulating in
// float32; a and b are of one kind.
func gemm(transA, transB bool, m, n, k int, a operand, lda int, b operand, ldb int, c []float32, ldc int) {
	if a.h == nil {
		blas.Sgemm(transA, transB, m, n, k, 1, a.f, lda, b.f, ldb, 0, c, ldc)
		return
	}
	// Native: the attention chose its path once, by the plan's Small path,
	// for all its blocks (some are above dnnl.LargeFLOPs).
	if err := dnnl.GemmBF16On(dnnl.Native, transA, transB, m, n, k, 1, a.h, lda, b.h, ldb, 0, c, ldc, 1); err != nil {
		panic(fmt.Sprintf("nn: attention GEMM: %v", err))
	}
}

// operand returns the contiguous float32 tensor x as a GEMM operand of the
// attention's precision: itself in float32, rounded to bfloat16 bits, or
// rounded through float16 back to float32, on up to workers goroutines.
// The tensor holding it is what Forward saves.
func (f *attentionFn) operand(workers int, x *tensor.Tensor) *tensor.Tensor {
	switch f.dtype {
	case tensor.BFloat16:
		return tensor.ToHalfOn(workers, x, tensor.BFloat16)
	case tensor.Float16:
		return tensor.ToHalfOn(workers, x, tensor.Float16).Float32()
	}
	return x
}

// at returns the operand of x (as operand made it) from element i on.
func (f *attentionFn) at(x *tensor.Tensor, i int) operand {
	if x.DType() == tensor.BFloat16 {
		return operand{h: x.Bits()[i:]}
	}
	return operand{f: x.Data()[i:]}
}

// gemmScratch holds a worker's rounded copy of an s×s matrix.
type gemmScratch struct {
	h []uint16
	f []float32
}

func (f *attentionFn) newGEMMScratch(s int) *gemmScratch {
	switch {
	case f.dtype == tensor.BFloat16 && !f.wide:
		return &gemmScratch{h: make([]uint16, s*s)}
	case f.dtype != tensor.Float32:
		return &gemmScratch{h: make([]uint16, s*s), f: make([]float32, s*s)}
	}
	return &gemmScratch{}
}

// lower returns the s×s matrix p (row stride s) as an operand of precision
// d: p itself in float32, else its causal blocks (row r up to the end of
// its 64-row block, all the causal GEMMs read) rounded to d.
func (g *gemmScratch) lower(d tensor.DType, p []float32, s int) operand {
	if d == tensor.Float32 {
		return operand{f: p}
	}
	for r0 := 0; r0 < s; r0 += causalBlock {
		r1 := min(s, r0+causalBlock)
		for r := r0; r < r1; r++ {
			tensor.RoundInto(d, g.h[r*s:r*s+r1], p[r*s:r*s+r1])
		}
	}
	if g.f == nil { // the native bfloat16 GEMM reads the bits
		return operand{h: g.h}
	}
	for r0 := 0; r0 < s; r0 += causalBlock {
		r1 := min(s, r0+causalBlock)
		for r := r0; r < r1; r++ {
			tensor.WidenInto(d, g.f[r*s:r*s+r1], g.h[r*s:r*s+r1])
		}
	}
	return operand{f: g.f}
}
