package tensor

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestEmptyPrefaults: a large Empty's pages are resident before anything
// writes them (prefault), where fresh heap memory would fault on first
// write. 48 MiB is more than the test process's heap has held, so the
// memory is fresh.
func TestEmptyPrefaults(t *testing.T) {
	const n = 12<<20 + 7 // float32s
	e := Empty(n)
	if prefaultOff.Load() {
		t.Skip("this kernel refuses MADV_POPULATE_WRITE (Linux before 5.14)")
	}
	d := e.Data()
	p := unsafe.Pointer(&d[0])
	lo := (uintptr(p) + pageSize - 1) &^ (pageSize - 1)
	hi := (uintptr(p) + uintptr(len(d))*4) &^ (pageSize - 1)
	vec := make([]byte, (hi-lo)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Add(p, lo-uintptr(p))), hi-lo, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d pages of a fresh %d-byte Empty are not resident", missing, len(vec), len(d)*4)
	}
	d[0], d[len(d)-1] = 1, 2 // the memory is usable
}
