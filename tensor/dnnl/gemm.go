package dnnl

import (
	"fmt"
	"sync"

	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/kernels"
)

// GemmBF16 computes C = alpha·op(A)·op(B) + beta·C with A and B in bfloat16
// and C in float32, accumulating in float32, on threads OpenMP threads
// (below 1 means 1). op(X) is X or Xᵀ as transA and
// transB say: A is stored m×k (k×m if transA) with row stride lda, B is stored
// k×n (n×k if transB) with row stride ldb, and C is m×n with row stride ldc.
// With beta == 0, C is overwritten (NaNs in C do not propagate); with
// alpha == 0 or k == 0, A and B are not read and C = beta·C.
//
// A negative size, a leading dimension below the stored width, or a slice
// too short for its shape is reported as an error before anything is read or
// written; so is any failure inside oneDNN, naming the call and its status.
func GemmBF16(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) error {
	if run, err := check(transA, transB, m, n, k, alpha, len(a), lda, len(b), ldb, beta, c, ldc); !run {
		return err
	}
	p, err := Plan()
	if err != nil {
		return err
	}
	return gemmOn(p.For(2*m*n*k), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, max(threads, 1))
}

// GemmBF16On is GemmBF16 by the given path, whatever the plan says, for
// measuring the paths side by side (gotron bench --gemm). Native on a CPU
// or build without native kernels runs widened.
func GemmBF16On(p Path, transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) error {
	if run, err := check(transA, transB, m, n, k, alpha, len(a), lda, len(b), ldb, beta, c, ldc); !run {
		return err
	}
	return gemmOn(p, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, max(threads, 1))
}

// gemmOn is GemmBF16 on checked arguments (m, n, k ≥ 1, alpha ≠ 0) by the
// given path.
func gemmOn(p Path, transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) error {
	if p == Native {
		return gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
	}
	return gemmWidened(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
}

// GemmF32 is GemmBF16 with A and B in float32: oneDNN's float32 matmul on
// threads OpenMP threads when [F32] reports it, else blas.Sgemm on blas's
// own threads. Its arguments are checked, and errors reported, as
// GemmBF16's.
//
// oneDNN computes each element of C as one float32 sum over k, whatever the
// thread count, except when m·n is too small to keep the threads busy; it
// may then split k between them, which changes the order of the sum.
func GemmF32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, threads int) error {
	if run, err := check(transA, transB, m, n, k, alpha, len(a), lda, len(b), ldb, beta, c, ldc); !run {
		return err
	}
	return gemmF32(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, max(threads, 1))
}

// check validates a GEMM's arguments (na and nb are the lengths of A and B)
// and settles the cases that need no product: an empty C, and k == 0 or
// alpha == 0 (C = beta·C). It reports whether the product must still run,
// and the error that stops it.
func check(transA, transB bool, m, n, k int, alpha float32, na, lda, nb, ldb int, beta float32, c []float32, ldc int) (run bool, err error) {
	if m < 0 || n < 0 || k < 0 {
		return false, fmt.Errorf("dnnl: negative size m=%d n=%d k=%d", m, n, k)
	}
	if m == 0 || n == 0 {
		return false, nil
	}
	if err := blas.CheckMatrix("C", len(c), m, n, ldc); err != nil {
		return false, fmt.Errorf("dnnl: %w", err)
	}
	if k == 0 || alpha == 0 {
		blas.ScaleC(c, m, n, ldc, beta)
		return false, nil
	}
	ar, ac := blas.Stored(transA, m, k)
	br, bc := blas.Stored(transB, k, n)
	if err := blas.CheckMatrix("A", na, ar, ac, lda); err != nil {
		return false, fmt.Errorf("dnnl: %w", err)
	}
	if err := blas.CheckMatrix("B", nb, br, bc, ldb); err != nil {
		return false, fmt.Errorf("dnnl: %w", err)
	}
	return true, nil
}

// widePool recycles the float32 copies gemmWidened makes.
var widePool sync.Pool

// gemmWidened is GemmBF16 on checked arguments through float32: it widens
// the stored extent of A and B ((rows−1)·ld + cols elements each) and runs
// the float32 GEMM with the same strides: oneDNN's on threads threads from
// LargeFLOPs on, one blas.Sgemm call below.
func gemmWidened(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) error {
	ar, ac := blas.Stored(transA, m, k)
	br, bc := blas.Stored(transB, k, n)
	na, nb := (ar-1)*lda+ac, (br-1)*ldb+bc
	buf, _ := widePool.Get().(*[]float32)
	if buf == nil {
		buf = new([]float32)
	}
	if cap(*buf) < na+nb {
		*buf = make([]float32, na+nb)
	}
	wa, wb := (*buf)[:na], (*buf)[na:na+nb]
	widen(wa, a[:na], threads)
	widen(wb, b[:nb], threads)
	var err error
	if 2*m*n*k >= LargeFLOPs {
		err = gemmF32(transA, transB, m, n, k, alpha, wa, lda, wb, ldb, beta, c, ldc, threads)
	} else {
		blas.Sgemm(transA, transB, m, n, k, alpha, wa, lda, wb, ldb, beta, c, ldc)
	}
	widePool.Put(buf)
	return err
}

// minWidenWork is the least number of elements widened per goroutine.
const minWidenWork = 1 << 16

// widen sets dst to src widened to float32 (exact), on up to threads
// goroutines for a large src: the GEMM that follows runs on the threads,
// and a widening on one of them would leave the others idle.
func widen(dst []float32, src []uint16, threads int) {
	kernels.ParallelFor(len(src), max(1, min(threads, len(src)/minWidenWork)), func(lo, hi int) {
		kernels.BF16ToF32(dst[lo:hi], src[lo:hi])
	})
}
