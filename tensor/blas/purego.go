//go:build !cgo || gotron_purego

package blas

func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmGo(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SetThreads is a no-op for the pure-Go BLAS, which runs on the caller's
// goroutine.
func SetThreads(n int) {}

// Threads reports 1: the pure-Go BLAS runs on the caller's goroutine.
func Threads() int { return 1 }

// Kernel names the BLAS in use.
func Kernel() string { return "gonum (pure Go)" }

// Load does nothing: the pure-Go BLAS needs no loading.
func Load() {}
