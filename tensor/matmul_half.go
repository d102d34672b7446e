package tensor

import (
	"fmt"

	"github.com/gotron/gotron/tensor/blas"
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

// promoteHalf rounds the float32 operand of a mixed-precision GEMM to the
// other's 16-bit type; operands of one type are returned as they are.
func promoteHalf(a, b *Tensor) (*Tensor, *Tensor) {
	if a.DType() == b.DType() {
		return a, b
	}
	d := halfType(a, b)
	if a.DType() == Float32 {
		a = ToHalf(a, d)
	} else if b.DType() == Float32 {
		b = ToHalf(b, d)
	}
	return a, b
}

// gemmHalf is Gemm with a 16-bit operand: both operands are rounded to its
// type and multiplied with float32 accumulation into the float32 c.
// bfloat16 runs on oneDNN's matmul (tensor/dnnl: AVX-512 BF16 where the CPU
// has it); float16 is widened and multiplied by the float32 BLAS, as this
// CPU family has no float16 arithmetic (the values are those of a float16
// GEMM with float32 accumulation; the speed is float32's).
func gemmHalf(transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	a, b = promoteHalf(a, b)
	d := a.DType()
	if d == Float16 {
		Gemm(transA, transB, alpha, a.Float32(), b.Float32(), beta, c)
		return
	}
	ad, ar, ac, lda := a.matrixBits()
	bd, br, bc, ldb := b.matrixBits()
	cd, m, n, ldc := c.matrix()
	k := ac
	if transA {
		ar, ac = ac, ar
		k = ac
	}
	if transB {
		br, bc = bc, br
	}
	if ar != m || bc != n || br != k {
		panic(fmt.Sprintf("tensor: Gemm shapes op(a) %d×%d, op(b) %d×%d, c %d×%d", ar, ac, br, bc, m, n))
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		blas.ScaleC(cd, m, n, ldc, beta)
		return
	}
	if err := dnnl.GemmBF16(transA, transB, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc); err != nil {
		panic(fmt.Sprintf("tensor: bfloat16 GEMM: %v", err))
	}
}
