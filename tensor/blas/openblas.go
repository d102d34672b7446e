//go:build cgo && !gotron_purego

package blas

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <cblas.h>

static void (*gotron_sgemm_p)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
	const blasint, const blasint, const blasint, const float, const float *, const blasint,
	const float *, const blasint, const float, float *, const blasint);
static void (*gotron_set_threads_p)(int);
static int (*gotron_get_threads_p)(void);
static char *(*gotron_corename_p)(void);

// gotron_blas_open sets OPENBLAS_CORETYPE to coretype unless it is already
// set (an empty coretype sets nothing), loads OpenBLAS and finds its
// functions. It returns NULL or the reason it failed.
static const char *gotron_blas_open(const char *lib, const char *coretype) {
	if (coretype[0] != 0 && setenv("OPENBLAS_CORETYPE", coretype, 0) != 0) {
		return "setenv OPENBLAS_CORETYPE failed";
	}
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		return dlerror();
	}
	gotron_sgemm_p = dlsym(h, "cblas_sgemm");
	gotron_set_threads_p = dlsym(h, "openblas_set_num_threads");
	gotron_get_threads_p = dlsym(h, "openblas_get_num_threads");
	gotron_corename_p = dlsym(h, "openblas_get_corename");
	if (!gotron_sgemm_p || !gotron_set_threads_p || !gotron_get_threads_p || !gotron_corename_p) {
		return "a function is missing (cblas_sgemm, openblas_set_num_threads, openblas_get_num_threads or openblas_get_corename): not OpenBLAS";
	}
	return NULL;
}

static void gotron_sgemm(int ta, int tb, blasint m, blasint n, blasint k, float alpha, const float *a, blasint lda,
	const float *b, blasint ldb, float beta, float *c, blasint ldc) {
	gotron_sgemm_p(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
		m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void gotron_set_threads(int n) { gotron_set_threads_p(n); }
static int gotron_get_threads(void) { return gotron_get_threads_p(); }
static const char *gotron_corename(void) { return gotron_corename_p(); }
*/
import "C"

import (
	"os"
	"sync"
	"unsafe"
)

// library is the OpenBLAS this build loads: the name Debian's packages
// (libopenblas0-pthread, libopenblas0-openmp) install for the dynamic
// loader.
const library = "libopenblas.so.0"

// openBLAS is the result of loading the library, once per process.
var openBLAS = sync.OnceValue(func() loaded {
	env, pinned := os.LookupEnv("OPENBLAS_CORETYPE")
	choice := CoreTypeFor(cpuFeatures())
	if pinned {
		choice = ""
	}
	lib, core := C.CString(library), C.CString(choice)
	defer C.free(unsafe.Pointer(lib))
	defer C.free(unsafe.Pointer(core))
	l := loaded{pinned: pinned, env: env, chose: choice}
	if msg := C.gotron_blas_open(lib, core); msg != nil {
		l.err = library + ": " + C.GoString(msg)
		return l
	}
	l.core = C.GoString(C.gotron_corename())
	return l
})

func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if openBLAS().err != "" {
		sgemmGo(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	C.gotron_sgemm(cBool(transA), cBool(transB), C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// SetThreads sets the size of OpenBLAS's thread pool for the whole process.
func SetThreads(n int) {
	if openBLAS().err == "" {
		C.gotron_set_threads(C.int(max(n, 1)))
	}
}

// Threads reports the size of OpenBLAS's thread pool (1 when gonum runs
// in its place).
func Threads() int {
	if openBLAS().err != "" {
		return 1
	}
	return int(C.gotron_get_threads())
}

// Kernel names the BLAS in use, the CPU kernel it runs and who chose it,
// for example "OpenBLAS SkylakeX (chosen by gotron from the CPU's
// features)" or "OpenBLAS Haswell (OPENBLAS_CORETYPE=Haswell)". Its first
// call loads the library: a program calls it (or Load) before it starts
// other threads, as the setenv that precedes the load is not safe beside
// getenv calls on other threads.
func Kernel() string { return openBLAS().describe() }

// Load loads the BLAS library now (Kernel's first call does the same).
func Load() { openBLAS() }
