//go:build !cgo || gotron_purego

package dnnl

import "github.com/gotron/gotron/tensor/blas"

// Available reports false: this build has no oneDNN, and GemmBF16 widens to
// float32 and calls blas.Sgemm.
func Available() bool { return false }

// F32 reports false: this build has no oneDNN, and GemmF32 calls
// blas.Sgemm.
func F32() bool { return false }

// Version says that this build has no oneDNN.
func Version() string { return "oneDNN not in this build" }

// gemm is GemmBF16 on checked arguments with m, n, k ≥ 1 and alpha ≠ 0.
func gemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) error {
	return gemmWidened(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
}

// gemmF32 is GemmF32 on checked arguments with m, n, k ≥ 1 and alpha ≠ 0.
func gemmF32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, threads int) error {
	blas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return nil
}
