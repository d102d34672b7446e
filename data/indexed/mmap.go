package indexed

import (
	"fmt"
	"io"
	"math"
	"os"
	"syscall"
)

// mapping is a file's bytes, memory-mapped read-only or, where mapping failed, read into
// memory.
type mapping struct {
	data   []byte
	mapped bool // data came from syscall.Mmap and must be unmapped
}

// mapFile maps path read-only. An empty file gives no bytes (mmap refuses length 0); a
// file mmap refuses (some network or FUSE file systems) is read instead.
func mapFile(path string) (mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return mapping{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return mapping{}, err
	}
	size := st.Size()
	switch {
	case size == 0:
		return mapping{}, nil
	case size > math.MaxInt:
		return mapping{}, fmt.Errorf("%s: %d bytes, more than this platform can address", path, size)
	}
	if data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
		return mapping{data: data, mapped: true}, nil
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return mapping{}, fmt.Errorf("%s: reading %d bytes: %w", path, size, err)
	}
	return mapping{data: data}, nil
}

// unmap releases the mapping; the bytes must not be used afterwards.
func (m *mapping) unmap() error {
	data, mapped := m.data, m.mapped
	*m = mapping{}
	if mapped {
		return syscall.Munmap(data)
	}
	return nil
}
