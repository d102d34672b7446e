package tensor

import (
	"runtime/metrics"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// minPrefault is the least size Empty prefaults: a tensor of a training
// step's size (megabytes); below it the pages are few.
const minPrefault = 1 << 20

// allocEmpty returns size bytes of the heap, not zeroed, with the pages
// prefaulted when the allocation took memory the heap did not have in use:
// freshly mapped or returned to the kernel by the scavenger. Those pages
// would trap on first write; the heap's reused pages are resident already,
// and prefaulting them costs a page-table walk per call (3% of the small
// benchmark model's steady CPU time when every large Empty did it).
//
// Whether the allocation took fresh memory is read from the runtime's
// counters (runtime/metrics, cheap beside filling the allocation): the heap's
// memory in use by the process (all it has mapped less what it has
// released) grew by at least a quarter of the allocation. The signal is
// not exact: another goroutine's allocation in between can make it
// prefault resident pages, and when the runtime returns other free pages
// to the kernel in the same allocation (near a memory limit) the growth
// can hide fresh ones, which then fault page by page as without
// prefaulting. Either way only the cost changes, not the memory.
func allocEmpty(size uintptr) unsafe.Pointer {
	if size < minPrefault || prefaultOff.Load() {
		return mallocgc(size, nil, false)
	}
	before := residentHeap()
	p := mallocgc(size, nil, false)
	if residentHeap() >= before+size/4 {
		prefaultFresh(p, size)
	}
	return p
}

// prefaultFresh is allocEmpty's prefault (a test counts its calls).
var prefaultFresh = prefault

// residentHeap returns the bytes the Go runtime has mapped and not
// released to the kernel.
func residentHeap() uintptr {
	s := [2]metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s[:])
	return uintptr(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// prefaultOff is set when the kernel refused MADV_POPULATE_WRITE (Linux
// before 5.14): Empty then leaves the pages to fault on first write.
var prefaultOff atomic.Bool

// prefault makes the pages of [p, p+size) resident and writable with one
// madvise(MADV_POPULATE_WRITE), where the first write to each would
// otherwise trap once per 4 KiB page. The memory is Empty's: its caller
// writes every element, so nothing is faulted in that would not be. The
// pages of memory Go's heap has used before are resident already, and
// the call returns after walking their page table.
func prefault(p unsafe.Pointer, size uintptr) {
	if size < minPrefault || prefaultOff.Load() {
		return
	}
	lo := (uintptr(p) + pageSize - 1) &^ (pageSize - 1)
	hi := (uintptr(p) + size) &^ (pageSize - 1) // whole pages: madvise wants an aligned start
	if hi <= lo {
		return
	}
	start := unsafe.Add(p, lo-uintptr(p)) // the first whole page
	if err := unix.Madvise(unsafe.Slice((*byte)(start), hi-lo), unix.MADV_POPULATE_WRITE); err == unix.EINVAL {
		prefaultOff.Store(true)
	}
}

// pageSize is the kernel's page size (4 KiB on x86-64; 16 or 64 KiB on
// some arm64 kernels).
var pageSize = uintptr(unix.Getpagesize())
