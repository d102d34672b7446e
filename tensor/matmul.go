package tensor

import (
	"fmt"

	"github.com/gotron/gotron/tensor/blas"
)

// matrix returns the storage, rows, columns and row stride of a 2-d tensor
// whose rows are dense (stride 1 along the last dimension), such as a
// contiguous matrix or a column Narrow of one.
func (t *Tensor) matrix() (data []float32, rows, cols, ld int) {
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
		return nil, rows, cols, ld
	}
	return t.storage[t.offset : t.offset+(rows-1)*ld+cols], rows, cols, ld
}

// Gemm computes c = alpha·op(a)·op(b) + beta·c on 2-d tensors through BLAS,
// where op transposes when transA/transB is set. Each operand must have
// dense rows (last stride 1); row strides may be larger than the width, so a
// column Narrow of a matrix is used in place without a copy. Shapes:
// op(a) [m,k], op(b) [k,n], c [m,n]. It panics on mismatched shapes.
func Gemm(transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) {
	ad, ar, ac, lda := a.matrix()
	bd, br, bc, ldb := b.matrix()
	cd, m, n, ldc := c.matrix()
	k := ac
	if transA {
		ar, ac = ac, ar
		k = ac
	}
	if transB {
		br, bc = bc, br
	}
	if ar != m || bc != n || br != k {
		panic(fmt.Sprintf("tensor: Gemm shapes op(a) %d×%d, op(b) %d×%d, c %d×%d", ar, ac, br, bc, m, n))
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		c.Scale(beta)
		return
	}
	blas.Sgemm(transA, transB, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc)
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
