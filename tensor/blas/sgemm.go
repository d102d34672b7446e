package blas

import "fmt"

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(X) is X or Xᵀ as transA/transB say. op(A) is m×k, op(B) is k×n and C is
// m×n; lda, ldb and ldc are the row strides (elements) of A, B and C as
// stored. With beta == 0, C is overwritten (NaNs in C do not propagate).
//
// Sgemm panics if a slice is too short for its shape: that is a programmer
// bug in the caller, not a runtime condition.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	check("A", a, ar, ac, lda)
	check("B", b, br, bc, ldb)
	check("C", c, m, n, ldc)
	if k == 0 {
		scale(c, m, n, ldc, beta)
		return
	}
	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func check(name string, x []float32, rows, cols, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols {
		panic(fmt.Sprintf("blas: %s has %d columns but leading dimension %d", name, cols, ld))
	}
	if need := (rows-1)*ld + cols; len(x) < need {
		panic(fmt.Sprintf("blas: %s is %d×%d with ld %d and needs %d elements, has %d", name, rows, cols, ld, need, len(x)))
	}
}

func scale(c []float32, m, n, ldc int, beta float32) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}
