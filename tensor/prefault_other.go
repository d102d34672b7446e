//go:build !linux

package tensor

import "unsafe"

// prefault does nothing outside Linux: the pages fault on first write.
func prefault(p unsafe.Pointer, size uintptr) {}
