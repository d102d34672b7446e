package data

import (
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/internal/sysmem"
)

// withMemory makes availableMemory report avail (and ok) under MemAvailable for the rest of
// the test.
func withMemory(t *testing.T, avail int64, ok bool) {
	t.Helper()
	saved := availableMemory
	limit := sysmem.Limit{Bytes: avail, Source: "MemAvailable of /proc/meminfo"}
	availableMemory = func() (sysmem.Limit, bool) { return limit, ok }
	t.Cleanup(func() { availableMemory = saved })
}

func TestLoadTextCorpusChecksMemory(t *testing.T) {
	root := writeTree(t, map[string]string{"d/a.txt": strings.Repeat("a", 40), "d/b.txt": strings.Repeat("b", 20)})
	dir := filepath.Join(root, "d")
	// 60 bytes of text need about 120 bytes of memory.
	withMemory(t, 119, true)
	_, err := LoadTextCorpus([]string{dir}, nil)
	want := "--text-data-path " + dir + ": the 2 files found hold 0.0 MiB (60 bytes) of text and loading them takes about twice that (the texts and the token stream made from them), more than the 0.0 MiB (119 bytes) of memory available (MemAvailable of /proc/meminfo): pass fewer or smaller files or directories to --text-data-path"
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
	withMemory(t, 120, true)
	if c, err := LoadTextCorpus([]string{dir}, nil); err != nil || c.NumBytes() != 60 {
		t.Errorf("with enough memory: %v", err)
	}
	withMemory(t, 0, false) // unreadable: no check
	if _, err := LoadTextCorpus([]string{dir}, nil); err != nil {
		t.Errorf("without a reading of the memory: %v", err)
	}
}

func TestCheckMemorySaturates(t *testing.T) {
	withMemory(t, math.MaxInt64-1, true)
	w := walker{files: []listed{{size: math.MaxInt64 / 2}, {size: math.MaxInt64 / 2}, {size: math.MaxInt64}}, fix: "fix"}
	err := w.checkMemory("src")
	if err == nil || !strings.Contains(err.Error(), "(9223372036854775807 bytes) of text") {
		t.Errorf("error %v", err)
	}
}

func TestFileKind(t *testing.T) {
	for _, c := range []struct {
		mode fs.FileMode
		want string
	}{
		{fs.ModeNamedPipe, "a named pipe"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "a character device"},
		{fs.ModeDevice, "a block device"},
		{fs.ModeSymlink, "a symbolic link"},
		{fs.ModeIrregular, "a file of unknown type"},
	} {
		if got := fileKind(c.mode | 0o644); got != c.want {
			t.Errorf("fileKind(%v) = %q, want %q", c.mode, got, c.want)
		}
	}
}
