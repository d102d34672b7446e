package blas

import (
	"fmt"
	"math"
)

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
	ar, ac := Stored(transA, m, k)
	br, bc := Stored(transB, k, n)
	check("A", len(a), ar, ac, lda)
	check("B", len(b), br, bc, ldb)
	check("C", len(c), m, n, ldc)
	if k == 0 {
		ScaleC(c, m, n, ldc, beta)
		return
	}
	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Stored returns the stored shape of a matrix whose operand op(X) is
// rows×cols: rows×cols, or cols×rows when trans.
func Stored(trans bool, rows, cols int) (int, int) {
	if trans {
		return cols, rows
	}
	return rows, cols
}

// CheckMatrix reports whether a stored rows×cols matrix with row stride ld
// fits in n elements: ld ≥ cols and n ≥ (rows−1)·ld + cols (an empty matrix
// always fits). The error names the matrix as name.
func CheckMatrix(name string, n, rows, cols, ld int) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	if ld < cols {
		return fmt.Errorf("%s has %d columns but leading dimension %d", name, cols, ld)
	}
	if rows-1 > (math.MaxInt-cols)/ld {
		return fmt.Errorf("%s is %d×%d with leading dimension %d, too large to address", name, rows, cols, ld)
	}
	if need := (rows-1)*ld + cols; n < need {
		return fmt.Errorf("%s is %d×%d with leading dimension %d and needs %d elements, has %d", name, rows, cols, ld, need, n)
	}
	return nil
}

func check(name string, n, rows, cols, ld int) {
	if err := CheckMatrix(name, n, rows, cols, ld); err != nil {
		panic("blas: " + err.Error())
	}
}

// ScaleC sets C = beta·C on the m×n matrix with row stride ldc (C = 0 when
// beta == 0, so NaNs in C do not propagate).
func ScaleC(c []float32, m, n, ldc int, beta float32) {
	for i := 0; i < m; i++ {
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
