package tensor

import (
	"fmt"
	"strings"
	"time"

	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/dnnl"
	"golang.org/x/sys/cpu"
)

// matrix returns the storage, rows, columns and row stride of a 2-d float32
// tensor whose rows are dense (stride 1 along the last dimension), such as a
// contiguous matrix or a column Narrow of one.
func (t *Tensor) matrix() (data []float32, rows, cols, ld int) {
	rows, cols, ld, n := t.matrixShape()
	if n == 0 {
		return nil, rows, cols, ld
	}
	return t.storage()[t.offset : t.offset+n], rows, cols, ld
}

// matrixBits is matrix for a 16-bit tensor.
func (t *Tensor) matrixBits() (data []uint16, rows, cols, ld int) {
	rows, cols, ld, n := t.matrixShape()
	if n == 0 {
		return nil, rows, cols, ld
	}
	return t.halfStorage()[t.offset : t.offset+n], rows, cols, ld
}

// matrixShape checks a matrix operand and returns its rows, columns, row
// stride and stored extent ((rows−1)·ld + cols, 0 when empty).
func (t *Tensor) matrixShape() (rows, cols, ld, n int) {
	if len(t.shape) != 2 {
		panic(fmt.Sprintf("tensor: matrix operand has shape %v, want 2-d", t.shape))
	}
	rows, cols = t.shape[0], t.shape[1]
	ld = t.strides[0]
	if cols > 1 && t.strides[1] != 1 || rows > 1 && ld < cols {
		panic(fmt.Sprintf("tensor: matrix operand %v with strides %v is not row-dense: call Contiguous", t.shape, t.strides))
	}
	if rows <= 1 {
		ld = max(ld, cols, 1)
	}
	if rows == 0 || cols == 0 {
		return rows, cols, ld, 0
	}
	return rows, cols, ld, (rows-1)*ld + cols
}

// Gemm computes c = alpha·op(a)·op(b) + beta·c on 2-d tensors on one
// thread, where op transposes when transA/transB is set. Each operand must
// have dense rows (last stride 1); row strides may be larger than the width,
// so a column Narrow of a matrix is used in place without a copy. Shapes:
// op(a) [m,k], op(b) [k,n], c [m,n]. It panics on mismatched shapes.
//
// c is float32. When a or b is 16-bit the product is a mixed-precision
// GEMM (promoteHalf): both operands are rounded to that type and the
// products are accumulated in float32. Gemm is GemmParallel with one
// worker, and gives its bits.
func Gemm(transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	GemmParallel(1, transA, transB, alpha, a, b, beta, c)
}

// gemmShape checks the operands of c = op(a)·op(b) (any element types) and
// returns m, n and k, panicking on mismatched shapes.
func gemmShape(transA, transB bool, a, b, c *Tensor) (m, n, k int) {
	ar, ac, _, _ := a.matrixShape()
	br, bc, _, _ := b.matrixShape()
	m, n, _, _ = c.matrixShape()
	if transA {
		ar, ac = ac, ar
	}
	if transB {
		br, bc = bc, br
	}
	if ar != m || bc != n || br != ac {
		panic(fmt.Sprintf("tensor: Gemm shapes op(a) %d×%d, op(b) %d×%d, c %d×%d", ar, ac, br, bc, m, n))
	}
	return m, n, ac
}

// MatMul returns op(a)·op(b) as a new [m,n] tensor.
func MatMul(a, b *Tensor, transA, transB bool) *Tensor {
	m := a.Dim(0)
	if transA {
		m = a.Dim(1)
	}
	n := b.Dim(1)
	if transB {
		n = b.Dim(0)
	}
	c := Empty(m, n)
	Gemm(transA, transB, 1, a, b, 0, c)
	return c
}

// Scale multiplies every element of t by s in place (s == 0 writes zeros).
func (t *Tensor) Scale(s float32) {
	if !t.IsContiguous() {
		c := t.Clone()
		c.Scale(s)
		t.CopyFrom(c)
		return
	}
	d := t.Data()
	if s == 0 {
		clear(d)
		return
	}
	for i := range d {
		d[i] *= s
	}
}

// minLargeFLOPs is the least work (2·m·n·k) of a float32 GEMM that runs on
// oneDNN, and the least work per worker of any GEMM. Smaller float32 GEMMs
// run on OpenBLAS, whose cost per call is a small fraction of oneDNN's
// (about 1.6 µs per call, BenchmarkGemmSmall in tensor/dnnl). dnnl's plan
// for bfloat16 GEMMs splits them at the same size.
const minLargeFLOPs = dnnl.LargeFLOPs

// GemmParallel is Gemm on up to workers threads: one per minLargeFLOPs of
// work, at most workers. Which library computes c depends on its element
// types and its size, never on workers:
//
//   - bfloat16 (a or b): dnnl.GemmBF16 on the threads: oneDNN's bf16
//     matmul, or the operands widened to float32 where dnnl.Plan found
//     the native kernel slower on this machine;
//   - float32 (float16 operands are rounded and widened first, see
//     promoteHalf) with 2·m·n·k ≥ minLargeFLOPs: oneDNN's float32 matmul on
//     the threads, which share the packed operands;
//   - smaller float32: one single-threaded OpenBLAS call.
//
// oneDNN computes each element as one sum over k in the same order whatever
// the thread count, unless m·n is too small to keep the threads busy (see
// dnnl.GemmF32). In a build without oneDNN, a large float32 GEMM is split
// into blocks of rows (or, for a short wide result, columns) of c, one
// goroutine each calling a single-threaded BLAS; the BLAS library's own
// pool should then be 1 (blas.SetThreads(1)).
func GemmParallel(workers int, transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	if r := timedGemm(); r != nil {
		defer r.add(timedShape(workers, transA, transB, a, b, c))
	}
	gemmOn(true, workers, transA, transB, alpha, a, b, beta, c)
}

// timedShape is the shape and threads of a GEMM a timer records (see
// TimeGemms), and its start.
func timedShape(workers int, transA, transB bool, a, b, c *Tensor) (GemmShape, int, time.Time) {
	m, n, k := gemmShape(transA, transB, a, b, c)
	return GemmShape{m, n, k, transA, transB}, gemmWorkers(workers, 2*m*n*k), time.Now()
}

// gemmOn is GemmParallel; without useDNNL a float32 GEMM never goes to
// oneDNN (GemmVarying).
func gemmOn(useDNNL bool, workers int, transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	m, n, k := gemmShape(transA, transB, a, b, c)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		c.Scale(beta)
		return
	}
	a, b = promoteHalf(a, b)
	flops := 2 * m * n * k
	w := gemmWorkers(workers, flops)
	switch {
	case a.DType() == BFloat16 && !useDNNL && widenedBF16(flops):
		gemmOn(false, workers, transA, transB, alpha, a.Float32(), b.Float32(), beta, c)
	case a.DType() == BFloat16:
		gemmBF16(w, transA, transB, m, n, k, alpha, a, b, beta, c)
	case float32OnDNNL(useDNNL, flops):
		ad, _, _, lda := a.matrix()
		bd, _, _, ldb := b.matrix()
		cd, _, _, ldc := c.matrix()
		if err := dnnl.GemmF32(transA, transB, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc, w); err != nil {
			panic(fmt.Sprintf("tensor: float32 GEMM: %v", err))
		}
	case w <= 1:
		sgemm(transA, transB, m, n, k, alpha, a, b, beta, c)
	default:
		gemmSplit(w, transA, transB, alpha, a, b, beta, c)
	}
}

// gemmWorkers is the threads a GEMM of the given work runs on: one per
// minLargeFLOPs, at most workers.
func gemmWorkers(workers, flops int) int { return min(workers, max(1, flops/minLargeFLOPs)) }

// float32OnDNNL reports whether a float32 GEMM of the given work runs on
// oneDNN (where useDNNL allows it: not for GemmVarying), else on OpenBLAS.
func float32OnDNNL(useDNNL bool, flops int) bool {
	return useDNNL && flops >= minLargeFLOPs && dnnl.F32()
}

// GemmVarying is GemmParallel for GEMMs whose shapes change from call to
// call, such as a MoE expert's over the rows routed to it: float32
// operands go to single-threaded OpenBLAS calls (on up to workers
// goroutines, as gemmSplit) and never to oneDNN, whose primitives are
// created and cached per shape — worth it for a model's fixed shapes, but
// for these a creation per call and a cache that grows with every new
// shape. bfloat16 operands that dnnl.Plan widens go the same way, as
// float32; those it runs natively need oneDNN and take GemmParallel.
func GemmVarying(workers int, transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	if r := timedGemm(); r != nil {
		defer r.add(timedShape(workers, transA, transB, a, b, c))
	}
	gemmOn(false, workers, transA, transB, alpha, a, b, beta, c)
}

// widenedBF16 reports whether dnnl.Plan runs a bfloat16 GEMM of this work
// widened to float32 (a plan that cannot be made has been refused at
// start-up; GemmBF16 reports it).
func widenedBF16(flops int) bool {
	p, err := dnnl.Plan()
	return err == nil && p.For(flops) == dnnl.Widened
}

// sgemm is one call of package blas (single-threaded OpenBLAS, or gonum
// without cgo) on checked float32 operands.
func sgemm(transA, transB bool, m, n, k int, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	ad, _, _, lda := a.matrix()
	bd, _, _, ldb := b.matrix()
	cd, _, _, ldc := c.matrix()
	blas.Sgemm(transA, transB, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc)
}

// gemmSplit computes a float32 GEMM on w goroutines, each a single-threaded
// BLAS call on its own block of rows of c, or of columns when c is wider
// than tall.
func gemmSplit(w int, transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	m, n, k := gemmShape(transA, transB, a, b, c)
	byRows := m >= n
	size := n
	if byRows {
		size = m
	}
	w = min(w, size)
	done := make(chan struct{}, w)
	for i := 0; i < w; i++ {
		lo, hi := i*size/w, (i+1)*size/w
		go func() {
			defer func() { done <- struct{}{} }()
			if byRows {
				dim := 0
				if transA {
					dim = 1
				}
				ai := a.Narrow(dim, lo, hi-lo)
				sgemm(transA, transB, hi-lo, n, k, alpha, ai, b, beta, c.Narrow(0, lo, hi-lo))
				return
			}
			dim := 1
			if transB {
				dim = 0
			}
			sgemm(transA, transB, m, hi-lo, k, alpha, a, b.Narrow(dim, lo, hi-lo), beta, c.Narrow(1, lo, hi-lo))
		}()
	}
	for i := 0; i < w; i++ {
		<-done
	}
}

// GemmWarning returns a sentence for the start-up output when this machine
// has no fast GEMM kernel, saying why and what it costs, or "": a build or
// machine without OpenBLAS (gonum's pure-Go GEMM), or a CPU without AVX2
// and FMA, where OpenBLAS and oneDNN run SSE kernels.
func GemmWarning() string {
	return gemmWarning(blas.Kernel(), dnnl.F32(), cpu.X86.HasAVX2 && cpu.X86.HasFMA)
}

// gemmWarning is GemmWarning for the BLAS kernel's description, whether
// oneDNN runs the large float32 GEMMs, and whether the CPU has AVX2 and FMA.
func gemmWarning(kernel string, oneDNN, avx2 bool) string {
	switch {
	case strings.HasPrefix(kernel, "gonum"):
		which, why := "every GEMM runs", ""
		if oneDNN {
			which = "GEMMs below 2 MFLOP run"
		}
		if _, detail, ok := strings.Cut(kernel, "slower: "); ok {
			why = " (" + strings.TrimSuffix(detail, ")") + ")"
		}
		return which + " on gonum's pure-Go BLAS, several times slower than OpenBLAS" + why + "; gotron bench --gemm measures them"
	case !avx2:
		return "this CPU has no AVX2 and FMA: GEMMs run on SSE kernels, about a quarter of an AVX2 core's rate or less; gotron bench --gemm measures them"
	}
	return ""
}

// GemmLibraries names the libraries behind Gemm and GemmParallel, with the
// CPU kernels they chose, for logs and benchmark headers: for example
// "oneDNN 2.6.3 (avx512_core_bf16) from 2 MFLOP, OpenBLAS Cooperlake below".
func GemmLibraries() string {
	if !dnnl.F32() {
		return blas.Kernel()
	}
	return fmt.Sprintf("%s from %d MFLOP, %s below", dnnl.Version(), minLargeFLOPs>>20, blas.Kernel())
}
