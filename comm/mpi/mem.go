//go:build mpi

package mpi

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/gotron/gotron/comm"
)

// Memory handed to a nonblocking MPI call must stay put until the call
// completes. Callers' buffers are Go memory: they are pinned
// (runtime.Pinner) for the life of the operation, which is what lets C keep
// their address after the call returns. Scratch space, headers and the
// count and displacement arrays that MPI_I*v reads while the operation
// progresses live in C memory (cmem) and are freed when the operation
// completes. When an operation gives up with a request still pending, its
// memory is never unpinned or freed: MPI may still write to it.

// cmem is a set of C allocations freed together. The first is held apart,
// so that a call that needs one (a message's note) allocates no slice.
type cmem struct {
	first unsafe.Pointer
	ptrs  []unsafe.Pointer
}

// alloc returns n zeroed bytes of C memory (never nil, even for n = 0).
func (m *cmem) alloc(n int) unsafe.Pointer {
	p := C.calloc(C.size_t(max(n, 1)), 1)
	if p == nil {
		panic(fmt.Sprintf("mpi: out of memory allocating %d bytes", n))
	}
	if m.first == nil {
		m.first = p
	} else {
		m.ptrs = append(m.ptrs, p)
	}
	return p
}

// ints returns n C ints.
func (m *cmem) ints(n int) []C.int {
	return unsafe.Slice((*C.int)(m.alloc(n*int(unsafe.Sizeof(C.int(0))))), max(n, 1))[:n]
}

// int64s returns n int64s.
func (m *cmem) int64s(n int) []int64 {
	return unsafe.Slice((*int64)(m.alloc(n*8)), max(n, 1))[:n]
}

// buffer returns an n-element Buffer of dtype dt in C memory.
func (m *cmem) buffer(dt comm.DType, n int) comm.Buffer {
	p := m.alloc(n * dt.Size())
	switch dt {
	case comm.Float32:
		return comm.F32(unsafe.Slice((*float32)(p), max(n, 1))[:n])
	case comm.BFloat16:
		return comm.BF16(unsafe.Slice((*uint16)(p), max(n, 1))[:n])
	case comm.Float16:
		return comm.F16(unsafe.Slice((*uint16)(p), max(n, 1))[:n])
	case comm.Int64:
		return comm.I64(unsafe.Slice((*int64)(p), max(n, 1))[:n])
	}
	panic(fmt.Sprintf("mpi: C buffer of %v", dt))
}

func (m *cmem) free() {
	if m.first != nil {
		C.free(m.first)
		m.first = nil
	}
	for _, p := range m.ptrs {
		C.free(p)
	}
	m.ptrs = nil
}

// pin pins b's memory and returns its address (nil for an empty Buffer).
func pin(p *runtime.Pinner, b comm.Buffer) unsafe.Pointer {
	if b.Len() == 0 {
		return nil
	}
	var ptr unsafe.Pointer
	switch b.DType() {
	case comm.Float32:
		ptr = unsafe.Pointer(&b.Float32s()[0])
	case comm.BFloat16, comm.Float16:
		ptr = unsafe.Pointer(&b.Uint16s()[0])
	case comm.Int64:
		ptr = unsafe.Pointer(&b.Int64s()[0])
	}
	p.Pin(ptr)
	return ptr
}

// addr returns the address of a Buffer in C memory, or of pinned memory.
func addr(b comm.Buffer) unsafe.Pointer {
	if b.Len() == 0 {
		return nil
	}
	switch b.DType() {
	case comm.Float32:
		return unsafe.Pointer(&b.Float32s()[0])
	case comm.BFloat16, comm.Float16:
		return unsafe.Pointer(&b.Uint16s()[0])
	case comm.Int64:
		return unsafe.Pointer(&b.Int64s()[0])
	}
	return nil
}

// mpiType returns the MPI element type that moves dt: float32 as MPI_FLOAT,
// bfloat16 and float16 as MPI_UINT16_T (moved, never reduced by MPI),
// int64 as MPI_INT64_T.
func mpiType(dt comm.DType) C.int {
	switch dt {
	case comm.Float32:
		return tF32
	case comm.BFloat16, comm.Float16:
		return tU16
	case comm.Int64:
		return tI64
	}
	return tByte
}

// maxCount is the largest element count or displacement an MPI call takes
// (a C int).
const maxCount = math.MaxInt32

// fitsInt reports whether every value fits an MPI count.
func fitsInt(vals ...int) bool {
	for _, v := range vals {
		if v > maxCount {
			return false
		}
	}
	return true
}

// cInts fills a C int array with vals.
func cInts(m *cmem, vals []int) *C.int {
	s := m.ints(len(vals))
	for i, v := range vals {
		s[i] = C.int(v)
	}
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}
