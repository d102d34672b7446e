package tensor

import (
	"runtime"
	"runtime/debug"
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

// TestPrefault: prefault makes every page of fresh anonymous memory
// resident (an mmap'd region is never resident before it is touched, so
// the test fails without it); below minPrefault it does nothing.
func TestPrefault(t *testing.T) {
	const size = 4 << 20
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer unix.Munmap(mem)
	resident := func(b []byte) int {
		vec := make([]byte, len(b)/int(pageSize))
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	small := mem[:minPrefault/2]
	prefault(unsafe.Pointer(&small[0]), uintptr(len(small)))
	if n := resident(small); n != 0 {
		t.Errorf("prefault of %d bytes (below minPrefault) made %d pages resident", len(small), n)
	}
	prefault(unsafe.Pointer(&mem[0]), size)
	if prefaultOff.Load() {
		t.Skip("this kernel refuses MADV_POPULATE_WRITE (Linux before 5.14)")
	}
	if n, want := resident(mem), size/int(pageSize); n != want {
		t.Errorf("%d of %d pages resident after prefault", n, want)
	}
}

// TestResidentHeapSeesFreshMemory: memory the heap takes after returning
// all it can to the kernel counts as fresh, the signal allocEmpty
// prefaults on.
func TestResidentHeapSeesFreshMemory(t *testing.T) {
	const size = 32 << 20
	debug.FreeOSMemory()
	before := residentHeap()
	b := make([]byte, size)
	if grew := residentHeap() - before; grew < size/2 { // allocEmpty asks for a quarter
		t.Errorf("a fresh %d-byte allocation grew the resident heap by %d", size, grew)
	}
	runtime.KeepAlive(b)
}

// TestEmptyPrefaultsOnlyFreshMemory: an Empty taking memory the heap has
// not used is prefaulted; one reusing the pages a collected Empty left is
// not (they are resident already).
func TestEmptyPrefaultsOnlyFreshMemory(t *testing.T) {
	defer func(f func(unsafe.Pointer, uintptr)) { prefaultFresh = f }(prefaultFresh)
	calls := 0
	prefaultFresh = func(p unsafe.Pointer, size uintptr) { calls++; prefault(p, size) }
	// A high collector target keeps the runtime's scavenger from returning
	// the collected pages to the kernel before they are reused.
	defer debug.SetGCPercent(debug.SetGCPercent(10000))
	const n = 4 << 20 // float32s: 16 MiB
	debug.FreeOSMemory()
	e := Empty(n)
	e.Data()[0] = 1
	if calls != 1 {
		t.Fatalf("a fresh 16 MiB Empty: %d prefaults, want 1", calls)
	}
	e = nil
	runtime.GC() // frees its pages to the heap, which keeps them
	e = Empty(n)
	e.Data()[0] = 1
	if calls != 1 {
		t.Errorf("an Empty reusing a collected one's pages: %d prefaults in all, want still 1", calls)
	}
}
