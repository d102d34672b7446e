//go:build cgo && !gotron_purego

package blas

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import "unsafe"

func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}

// SetThreads sets the size of OpenBLAS's thread pool for the whole process.
func SetThreads(n int) {
	if n < 1 {
		n = 1
	}
	C.openblas_set_num_threads(C.int(n))
}

// Threads reports the size of OpenBLAS's thread pool.
func Threads() int { return int(C.openblas_get_num_threads()) }

// Kernel names the BLAS in use and the CPU kernel it chose, for example
// "OpenBLAS Haswell" (OPENBLAS_CORETYPE pins it).
func Kernel() string {
	return "OpenBLAS " + C.GoString(C.openblas_get_corename())
}
