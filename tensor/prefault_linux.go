package tensor

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// minPrefault is the least size Empty prefaults: a tensor of a training
// step's size (megabytes); below it the pages are few.
const minPrefault = 1 << 20

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
