package tensor

import (
	"fmt"

	"github.com/gotron/gotron/tensor/blas"
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

// Gemm computes c = alpha·op(a)·op(b) + beta·c on 2-d tensors through BLAS,
// where op transposes when transA/transB is set. Each operand must have
// dense rows (last stride 1); row strides may be larger than the width, so a
// column Narrow of a matrix is used in place without a copy. Shapes:
// op(a) [m,k], op(b) [k,n], c [m,n]. It panics on mismatched shapes.
//
// c is float32. When a or b is 16-bit the product is a mixed-precision
// GEMM (promoteHalf): both operands are rounded to that type and the
// products are accumulated in float32.
func Gemm(transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	m, n, k := gemmShape(transA, transB, a, b, c)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		c.Scale(beta)
		return
	}
	a, b = promoteHalf(a, b)
	if a.DType() == BFloat16 {
		gemmBF16(transA, transB, m, n, k, alpha, a, b, beta, c)
		return
	}
	ad, _, _, lda := a.matrix()
	bd, _, _, ldb := b.matrix()
	cd, _, _, ldc := c.matrix()
	blas.Sgemm(transA, transB, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc)
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
	c := New(m, n)
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

// minParallelFLOPs is the least work (2·m·n·k) worth splitting a GEMM over
// goroutines.
const minParallelFLOPs = 1 << 21

// GemmParallel is Gemm split over up to workers goroutines, each calling a
// single-threaded BLAS on its own block of rows (or, for a short wide
// result, columns) of c. Each element of c is computed by one call with the
// same k-loop as Gemm's, so the result does not depend on workers when the
// BLAS kernel's per-element arithmetic does not depend on the block shape.
// The BLAS library's own thread pool should be 1 (blas.SetThreads(1)) so
// the goroutines do not oversubscribe the cores.
//
// A mixed-precision GEMM (a or b 16-bit) prepares its operands once,
// before the split (promoteHalf).
func GemmParallel(workers int, transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	a, b = promoteHalf(a, b)
	m, n := c.Dim(0), c.Dim(1)
	k := a.Dim(1)
	if transA {
		k = a.Dim(0)
	}
	w := min(workers, max(1, 2*m*n*k/minParallelFLOPs))
	if w <= 1 {
		Gemm(transA, transB, alpha, a, b, beta, c)
		return
	}
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
				var ai *Tensor
				if transA {
					ai = a.Narrow(1, lo, hi-lo)
				} else {
					ai = a.Narrow(0, lo, hi-lo)
				}
				Gemm(transA, transB, alpha, ai, b, beta, c.Narrow(0, lo, hi-lo))
				return
			}
			var bi *Tensor
			if transB {
				bi = b.Narrow(0, lo, hi-lo)
			} else {
				bi = b.Narrow(1, lo, hi-lo)
			}
			Gemm(transA, transB, alpha, a, bi, beta, c.Narrow(1, lo, hi-lo))
		}()
	}
	for i := 0; i < w; i++ {
		<-done
	}
}
