// Package blas is gotron's door to a BLAS library: single-precision GEMM on
// row-major matrices.
//
// With cgo (the default build) it calls OpenBLAS (Debian's libopenblas-dev)
// through cblas_sgemm. Built with CGO_ENABLED=0, or with the build tag
// gotron_purego, it falls back to gonum's pure-Go BLAS: correct, slower.
//
// OpenBLAS keeps one thread pool per process. SetThreads sets its size; the
// trainer sets it once at start-up to the cores divided by the ranks that
// share the process (one thread per rank when several ranks run as
// goroutines, all cores for a lone rank).
package blas
