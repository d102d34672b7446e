//go:build !linux

package tensor

import "unsafe"

// allocEmpty returns size bytes of the heap, not zeroed. Outside Linux its
// pages fault on first write.
func allocEmpty(size uintptr) unsafe.Pointer { return mallocgc(size, nil, false) }

// prefault does nothing outside Linux.
func prefault(p unsafe.Pointer, size uintptr) {}
