package tensor

import (
	"fmt"

	"github.com/gotron/gotron/tensor/dnnl"
)

// halfType returns the 16-bit type of a mixed-precision GEMM on a and b
// (at least one of them 16-bit), panicking when they are of two different
// 16-bit types.
func halfType(a, b *Tensor) DType {
	da, db := a.DType(), b.DType()
	switch {
	case da == Float32:
		return db
	case db == Float32, da == db:
		return da
	}
	panic(fmt.Sprintf("tensor: GEMM of a %v and a %v operand", da, db))
}

// promoteHalf prepares the operands of a GEMM with a 16-bit operand: both
// are rounded to its type and multiplied with float32 accumulation.
// bfloat16 operands are returned as bfloat16 (gemmBF16 runs them on
// dnnl.GemmBF16: oneDNN's bf16 matmul where it is faster on this machine,
// else widened to float32, as dnnl.Plan decided). float16 operands are
// returned widened to float32, for the float32 BLAS, as this CPU family has
// no float16 arithmetic (the values are those of a float16 GEMM with float32
// accumulation; the speed is float32's). Two float32 operands are returned
// as they are.
func promoteHalf(a, b *Tensor) (*Tensor, *Tensor) {
	if a.DType() == Float32 && b.DType() == Float32 {
		return a, b
	}
	d := halfType(a, b)
	if a.DType() != d { // views of the right type are used in place
		a = ToHalf(a, d)
	}
	if b.DType() != d {
		b = ToHalf(b, d)
	}
	if d == Float16 {
		return a.Float32(), b.Float32()
	}
	return a, b
}

// gemmBF16 is Gemm on checked, non-empty bfloat16 operands: dnnl.GemmBF16
// on threads threads with float32 accumulation into the float32 c.
func gemmBF16(threads int, transA, transB bool, m, n, k int, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	ad, _, _, lda := a.matrixBits()
	bd, _, _, ldb := b.matrixBits()
	cd, _, _, ldc := c.matrix()
	if err := dnnl.GemmBF16(transA, transB, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc, threads); err != nil {
		panic(fmt.Sprintf("tensor: bfloat16 GEMM: %v", err))
	}
}
