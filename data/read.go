package data

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"syscall"

	"github.com/gotron/gotron/internal/sysmem"
)

// availableMemory is sysmem.Available; tests replace it.
var availableMemory = sysmem.Available

// read checks that the listed files fit in memory and reads them into w.docs, or w.skipped
// for binary ones; source names them all in errors ("--text-data-path a,b").
func (w *walker) read(source string) error {
	if err := w.checkMemory(source); err != nil {
		return err
	}
	for _, f := range w.files {
		if err := w.add(f); err != nil {
			return err
		}
	}
	return nil
}

// checkMemory refuses files whose total size, twice over, exceeds the memory available: a
// corpus is held as its documents' texts and as the token stream built from them (see
// [Corpus.Stream]). The error names the limit that applied (sysmem.Limit.Source). Without a
// reading of the available memory there is no check.
func (w *walker) checkMemory(source string) error {
	limit, ok := availableMemory()
	if !ok {
		return nil
	}
	avail := limit.Bytes
	var total int64
	for _, f := range w.files {
		total = addSat(total, f.size)
	}
	if need := addSat(total, total); need <= avail {
		return nil
	}
	return fmt.Errorf("%s: the %d files found hold %s (%d bytes) of text and loading them takes about twice that (the texts and the token stream made from them), more than the %s (%d bytes) of memory available (%s): %s",
		source, len(w.files), sysmem.Format(total), total, sysmem.Format(avail), avail, limit.Source, w.fix)
}

// addSat returns a+b for non-negative a and b, or math.MaxInt64 if that overflows.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// add reads the listed file f as a document, or lists it as skipped if binary. The file
// is opened without blocking and must still be a regular file, so that a pipe or device
// put in its place since it was listed is refused rather than read.
func (w *walker) add(f listed) error {
	file, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", w.label, f.path, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", w.label, f.path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %s is now %s, not a regular file: pass text files or directories of them", w.label, f.path, fileKind(st.Mode()))
	}
	text, err := readAll(file, st.Size())
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", w.label, f.path, err)
	}
	if bytes.IndexByte(text, byte(EndOfDocument)) >= 0 {
		w.skipped = append(w.skipped, f.path)
		return nil
	}
	w.docs = append(w.docs, Document{Name: f.name, Text: text})
	return nil
}

// readAll reads r to the end into a buffer sized for a file of size bytes, growing it only
// if the file has grown, as os.ReadFile does.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, max(size, 0)+1) // one more, to see the end without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// fileKind names the type of a file that is neither regular nor a directory, with its
// article: "a named pipe".
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeIrregular != 0:
		return "a file of unknown type"
	}
	return fmt.Sprintf("a file of mode %v", m)
}
