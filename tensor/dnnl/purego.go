//go:build !cgo || gotron_purego

package dnnl

// Available reports false: this build has no oneDNN, and GemmBF16 widens to
// float32 and calls blas.Sgemm.
func Available() bool { return false }

// SetThreads is a no-op in this build: the float32 fallback runs on blas,
// whose threads blas.SetThreads sets.
func SetThreads(n int) {}

// Threads reports 1: this build runs no oneDNN threads.
func Threads() int { return 1 }

// gemm is GemmBF16 on checked arguments with m, n, k ≥ 1 and alpha ≠ 0.
func gemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) error {
	return gemmWidened(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
