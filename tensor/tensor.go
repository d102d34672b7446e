package tensor

import (
	"fmt"
	"strings"
	"unsafe"
)

// Tensor is an N-dimensional strided view of float32 storage, or of 16-bit
// storage (bfloat16 or float16, DType) for parameters kept in half
// precision.
//
// Element (i0, i1, ...) lives at storage[offset + Σ ik·strides[k]]. Views made
// by Reshape, Transpose, Permute, Narrow and Split share storage with their
// source: writing through one is visible through the other, and Release
// frees it for all of them.
type Tensor struct {
	buf     *buffer
	offset  int
	shape   []int
	strides []int
}

// buffer is storage shared by a tensor and its views: data for float32,
// half for the 16-bit types. n is its length, remembered while the data is
// released.
type buffer struct {
	data  []float32
	half  []uint16
	dtype DType
	n     int
}

// released reports whether the storage was released.
func (b *buffer) released() bool { return b.data == nil && b.half == nil && b.n > 0 }

// storage returns the float32 elements, panicking on released storage (a
// use of a tensor after Release) and on a 16-bit tensor (read those with
// Bits, or widen them with Float32): both are programmer bugs.
func (t *Tensor) storage() []float32 {
	if t.buf.dtype != Float32 {
		panic(fmt.Sprintf("tensor: float32 access to a %v %v tensor: read it with Bits or widen it with Float32", t.buf.dtype, t.shape))
	}
	if t.buf.released() {
		panic(fmt.Sprintf("tensor: use of a %v tensor whose storage was released (Release) and not restored", t.shape))
	}
	return t.buf.data
}

// halfStorage returns the 16-bit elements of a bfloat16 or float16 tensor.
func (t *Tensor) halfStorage() []uint16 {
	if t.buf.dtype == Float32 {
		panic(fmt.Sprintf("tensor: 16-bit access to a float32 %v tensor", t.shape))
	}
	if t.buf.released() {
		panic(fmt.Sprintf("tensor: use of a %v tensor whose storage was released (Release) and not restored", t.shape))
	}
	return t.buf.half
}

// DType returns the element type of t's storage.
func (t *Tensor) DType() DType { return t.buf.dtype }

// New returns a zero-filled contiguous tensor of the given shape.
func New(shape ...int) *Tensor {
	return FromSlice(make([]float32, numel(shape)), shape...)
}

// FromSlice wraps data (not copied) as a contiguous tensor of the given
// shape. It panics if len(data) differs from the shape's element count.
func FromSlice(data []float32, shape ...int) *Tensor {
	if n := numel(shape); n != len(data) {
		panic(fmt.Sprintf("tensor: FromSlice: shape %v has %d elements, data has %d", shape, n, len(data)))
	}
	sh := append([]int(nil), shape...)
	return &Tensor{buf: &buffer{data: data, n: len(data)}, shape: sh, strides: contiguousStrides(sh)}
}

// NewOf returns a zero-filled contiguous tensor of the given dtype and
// shape.
func NewOf(d DType, shape ...int) *Tensor {
	if d == Float32 {
		return New(shape...)
	}
	return FromBits(d, make([]uint16, numel(shape)), shape...)
}

// FromBits wraps 16-bit data (not copied) as a contiguous bfloat16 or
// float16 tensor of the given shape. It panics if len(data) differs from
// the shape's element count or d is not a 16-bit type.
func FromBits(d DType, data []uint16, shape ...int) *Tensor {
	if d != BFloat16 && d != Float16 {
		panic(fmt.Sprintf("tensor: FromBits of type %v", d))
	}
	if n := numel(shape); n != len(data) {
		panic(fmt.Sprintf("tensor: FromBits: shape %v has %d elements, data has %d", shape, n, len(data)))
	}
	sh := append([]int(nil), shape...)
	return &Tensor{buf: &buffer{half: data, dtype: d, n: len(data)}, shape: sh, strides: contiguousStrides(sh)}
}

// Scalar returns a 0-dimensional tensor holding v.
func Scalar(v float32) *Tensor { return FromSlice([]float32{v}) }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative dimension in shape %v", shape))
		}
		n *= d
	}
	return n
}

func contiguousStrides(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

// Shape returns the tensor's shape. The caller must not modify it.
func (t *Tensor) Shape() []int { return t.shape }

// Dim returns the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int { return t.shape[t.axis(i)] }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Len returns the number of elements.
func (t *Tensor) Len() int { return numel(t.shape) }

// Strides returns the element strides of each dimension. The caller must not
// modify them.
func (t *Tensor) Strides() []int { return t.strides }

func (t *Tensor) axis(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	if i < 0 || i >= len(t.shape) {
		panic(fmt.Sprintf("tensor: dimension %d out of range for shape %v", i, t.shape))
	}
	return i
}

// IsContiguous reports whether the elements are laid out densely in
// row-major order.
func (t *Tensor) IsContiguous() bool {
	s := 1
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] != 1 && t.strides[i] != s {
			return false
		}
		s *= t.shape[i]
	}
	return true
}

// Data returns the elements of a contiguous tensor as a slice sharing its
// storage. It panics on a non-contiguous tensor (call Contiguous first).
func (t *Tensor) Data() []float32 {
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: Data of a non-contiguous tensor %v (strides %v): call Contiguous", t.shape, t.strides))
	}
	return t.storage()[t.offset : t.offset+t.Len()]
}

// Bits returns the elements of a contiguous bfloat16 or float16 tensor as a
// slice sharing its storage. It panics on a float32 or non-contiguous
// tensor.
func (t *Tensor) Bits() []uint16 {
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: Bits of a non-contiguous tensor %v (strides %v): call Contiguous", t.shape, t.strides))
	}
	return t.halfStorage()[t.offset : t.offset+t.Len()]
}

// SameShape reports whether a and b have equal shapes.
func SameShape(a, b *Tensor) bool {
	if len(a.shape) != len(b.shape) {
		return false
	}
	for i := range a.shape {
		if a.shape[i] != b.shape[i] {
			return false
		}
	}
	return true
}

// At returns the element at the given index (widened to float32 from a
// 16-bit type).
func (t *Tensor) At(idx ...int) float32 {
	if t.buf.dtype != Float32 {
		return widenOne(t.buf.dtype, t.halfStorage()[t.index(idx)])
	}
	return t.storage()[t.index(idx)]
}

// Set stores v at the given index (rounded to nearest even in a 16-bit
// type).
func (t *Tensor) Set(v float32, idx ...int) {
	if t.buf.dtype != Float32 {
		t.halfStorage()[t.index(idx)] = roundOne(t.buf.dtype, v)
		return
	}
	t.storage()[t.index(idx)] = v
}

func (t *Tensor) index(idx []int) int {
	if len(idx) != len(t.shape) {
		panic(fmt.Sprintf("tensor: index %v for shape %v", idx, t.shape))
	}
	o := t.offset
	for i, v := range idx {
		if v < 0 || v >= t.shape[i] {
			panic(fmt.Sprintf("tensor: index %v out of range for shape %v", idx, t.shape))
		}
		o += v * t.strides[i]
	}
	return o
}

// String formats the shape and, for small tensors, the values.
func (t *Tensor) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor%v", t.shape)
	if n := t.Len(); n <= 16 {
		fmt.Fprintf(&b, "%v", t.Float32().Contiguous().Data())
	}
	return b.String()
}

// Storage returns the identity of t's underlying storage (shared by all its
// views, 0 for an empty tensor) and its size in bytes, for memory
// accounting: two tensors with the same identity share memory. The size is
// the allocation's, whether or not it is released.
func (t *Tensor) Storage() (id uintptr, bytes int64) {
	if t.buf.n == 0 {
		return 0, 0
	}
	return uintptr(unsafe.Pointer(t.buf)), int64(t.buf.n) * int64(t.buf.dtype.Size())
}

// Release frees t's storage, for t and every view of it: until Restore,
// any read or write of the elements panics. Activation recompute uses it
// to drop an output that backward will compute again
// (CheckpointWithoutOutput). Releasing twice is a no-op.
func (t *Tensor) Release() { t.buf.data, t.buf.half = nil, nil }

// Released reports whether t's storage is released.
func (t *Tensor) Released() bool { return t.buf.released() }

// RestoreWith gives released float32 storage the elements data (not
// copied; len(data) must be the storage's size), seen by t and every view
// of it: a sharded owner of parameters (dp.FSDP) binds a gathered
// parameter this way. It panics on storage that is not released, of a
// 16-bit type, or of another size: all programmer bugs.
func (t *Tensor) RestoreWith(data []float32) {
	t.checkRestore(Float32, len(data))
	t.buf.data = data
}

// RestoreWithBits is RestoreWith for bfloat16 and float16 storage.
func (t *Tensor) RestoreWithBits(bits []uint16) {
	if t.buf.dtype == Float32 {
		panic(fmt.Sprintf("tensor: restoring 16-bit storage of a float32 %v tensor", t.shape))
	}
	t.checkRestore(t.buf.dtype, len(bits))
	t.buf.half = bits
}

// checkRestore panics unless t's storage is released, of type d and n
// elements long.
func (t *Tensor) checkRestore(d DType, n int) {
	switch {
	case !t.Released():
		panic(fmt.Sprintf("tensor: restoring the storage of a %v tensor that is not released", t.shape))
	case t.buf.dtype != d:
		panic(fmt.Sprintf("tensor: restoring %v storage of a %v %v tensor", d, t.buf.dtype, t.shape))
	case n != t.buf.n:
		panic(fmt.Sprintf("tensor: restoring %d elements into storage of %d (tensor %v)", n, t.buf.n, t.shape))
	}
}

// Restore gives released storage a new zero-filled allocation of the same
// size, seen by t and every view of it; storage that is not released is
// left alone.
func (t *Tensor) Restore() {
	if !t.Released() {
		return
	}
	if t.buf.dtype == Float32 {
		t.buf.data = make([]float32, t.buf.n)
	} else {
		t.buf.half = make([]uint16, t.buf.n)
	}
}
