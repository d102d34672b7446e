package dnnl

import (
	"fmt"
	"math"
	"sync"

	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/kernels"
)

// GemmBF16 computes C = alpha·op(A)·op(B) + beta·C with A and B in bfloat16
// and C in float32, accumulating in float32. op(X) is X or Xᵀ as transA and
// transB say: A is stored m×k (k×m if transA) with row stride lda, B is stored
// k×n (n×k if transB) with row stride ldb, and C is m×n with row stride ldc.
// With beta == 0, C is overwritten (NaNs in C do not propagate); with
// alpha == 0 or k == 0, A and B are not read and C = beta·C.
//
// A negative size, a leading dimension below the stored width, or a slice
// too short for its shape is reported as an error before anything is read or
// written; so is any failure inside oneDNN, naming the call and its status.
func GemmBF16(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("dnnl: negative size m=%d n=%d k=%d", m, n, k)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if err := checkLen("C", len(c), m, n, ldc); err != nil {
		return err
	}
	if k == 0 || alpha == 0 {
		scale(c, m, n, ldc, beta)
		return nil
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := checkLen("A", len(a), ar, ac, lda); err != nil {
		return err
	}
	if err := checkLen("B", len(b), br, bc, ldb); err != nil {
		return err
	}
	return gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkLen reports whether a rows×cols matrix (rows, cols ≥ 1) with row
// stride ld fits in n elements: ld ≥ cols and n ≥ (rows−1)·ld + cols.
func checkLen(name string, n, rows, cols, ld int) error {
	if ld < cols {
		return fmt.Errorf("dnnl: %s has %d columns but leading dimension %d", name, cols, ld)
	}
	if rows-1 > (math.MaxInt-cols)/ld {
		return fmt.Errorf("dnnl: %s is %d×%d with leading dimension %d, too large to address", name, rows, cols, ld)
	}
	if need := (rows-1)*ld + cols; n < need {
		return fmt.Errorf("dnnl: %s is %d×%d with leading dimension %d and needs %d elements, has %d", name, rows, cols, ld, need, n)
	}
	return nil
}

// scale sets C = beta·C on the m×n matrix with row stride ldc (C = 0 when
// beta == 0).
func scale(c []float32, m, n, ldc int, beta float32) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// widePool recycles the float32 copies gemmWidened makes.
var widePool sync.Pool

// gemmWidened is GemmBF16 on checked arguments through float32: it widens
// the stored extent of A and B ((rows−1)·ld + cols elements each) and calls
// blas.Sgemm with the same strides.
func gemmWidened(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) error {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	na, nb := (ar-1)*lda+ac, (br-1)*ldb+bc
	buf, _ := widePool.Get().(*[]float32)
	if buf == nil {
		buf = new([]float32)
	}
	if cap(*buf) < na+nb {
		*buf = make([]float32, na+nb)
	}
	wa, wb := (*buf)[:na], (*buf)[na:na+nb]
	kernels.BF16ToF32(wa, a[:na])
	kernels.BF16ToF32(wb, b[:nb])
	blas.Sgemm(transA, transB, m, n, k, alpha, wa, lda, wb, ldb, beta, c, ldc)
	widePool.Put(buf)
	return nil
}
