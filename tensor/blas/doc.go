// Package blas is gotron's door to a BLAS library: single-precision GEMM on
// row-major matrices.
//
// With cgo (the default build) it calls OpenBLAS (Debian's libopenblas0,
// headers from libopenblas-dev) through cblas_sgemm. The library is loaded
// at its first use (dlopen of libopenblas.so.0), after gotron has set
// OPENBLAS_CORETYPE to the kernel [CoreTypeFor] picks from the CPU's
// instruction sets: OpenBLAS's own detection reads the CPU's model number
// from a table and runs its generic Prescott kernel, about 6× slower, on a
// CPU it does not know. An OPENBLAS_CORETYPE set before gotron starts is
// left alone. [Kernel] names the kernel that runs and who chose it; the
// trainer prints it on its start-up line.
//
// Built with CGO_ENABLED=0, or with the build tag gotron_purego, or when
// OpenBLAS cannot be loaded (Kernel says why), it runs gonum's pure-Go BLAS:
// correct, several times slower.
//
// OpenBLAS keeps one thread pool per process. SetThreads sets its size; the
// trainer sets it once at start-up to the cores divided by the ranks that
// share the process (one thread per rank when several ranks run as
// goroutines, all cores for a lone rank).
package blas
