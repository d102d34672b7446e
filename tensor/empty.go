package tensor

import (
	"fmt"
	"unsafe"
)

// Empty returns a contiguous float32 tensor of the given shape whose
// elements are not initialised, as torch.empty: the caller must write
// every element before any is read. Use it for a result a kernel
// overwrites whole (a GEMM output with beta 0, an element-wise output, a
// copy), never for an accumulator; New gives zeros.
//
// Go zeroes every allocation, and for the large tensors of a training step
// (megabytes each, allocated afresh every micro-batch) that zeroing is one
// pass over memory more than the kernel's own: about a tenth of a bf16
// step's CPU time on the benchmark's medium model. Empty skips it.
//
// On Linux, when an Empty of a megabyte or more takes pages the heap did
// not have in use, they are made resident with one
// madvise(MADV_POPULATE_WRITE) (prefault) rather than a trap on the first
// write to each page: a step's first iteration writes its activations into
// fresh memory, and under a hypervisor those traps were 13% of a short
// benchmark's CPU samples; prefaulting made the first iteration 7–15%
// faster there. Memory the heap reuses is resident already and is not
// prefaulted: the call would cost a page-table walk for nothing
// (docs/BENCHMARKS.md, § The first iteration).
//
// Under the build tag gotron_poison every element is set to a quiet NaN
// instead, so a kernel that leaves an element unwritten turns a test's
// numbers into NaNs (make test runs the model's packages so).
func Empty(shape ...int) *Tensor {
	return FromSlice(emptyFloat32(numel(shape)), shape...)
}

// EmptyOf is Empty for the dtype d: a 16-bit tensor's elements are
// likewise not initialised (under gotron_poison, NaN bits).
func EmptyOf(d DType, shape ...int) *Tensor {
	switch d {
	case Float32:
		return Empty(shape...)
	case BFloat16, Float16:
		return FromBits(d, emptyUint16(d, numel(shape)), shape...)
	}
	panic(fmt.Sprintf("tensor: EmptyOf of type %v", d))
}

// mallocgc is the Go runtime's allocator. The runtime keeps its signature
// for packages outside the standard library that link to it (its comment:
// "Do not remove or change the type signature", go.dev/issue/67401); with
// a nil type the memory holds no pointers, and needzero false leaves it as
// the heap had it.
//
//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer

// minEmpty is the least number of bytes allocated without zeroing: below
// it the allocation comes from a size class whose zeroing is cheap, and
// make is clearer.
const minEmpty = 32 << 10

// emptyFloat32 returns n float32s, not initialised when large.
func emptyFloat32(n int) []float32 {
	if n*4 < minEmpty {
		return poisonFloat32(make([]float32, n))
	}
	q := allocEmpty(uintptr(n) * 4)
	return poisonFloat32(unsafe.Slice((*float32)(q), n))
}

// emptyUint16 returns n 16-bit values of type d, not initialised when
// large.
func emptyUint16(d DType, n int) []uint16 {
	if n*2 < minEmpty {
		return poisonUint16(d, make([]uint16, n))
	}
	q := allocEmpty(uintptr(n) * 2)
	return poisonUint16(d, unsafe.Slice((*uint16)(q), n))
}
