package indexed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// writeBuffer is the size of the Writer's buffers over the temporary files.
const writeBuffer = 1 << 20

// Writer builds an indexed dataset, PREFIX.bin and PREFIX.idx, the way Megatron's
// IndexedDatasetBuilder does (add_document for each document, then finalize), atomically:
// it writes temporary files in the prefix's directory (PREFIX.bin.tmp-NNNN, and
// PREFIX.idx.tmp-NNNN at [Writer.Finish]), and Finish renames them into place, the .idx
// last. An aborted or failed Writer removes its temporary files, so an interrupted run
// never leaves a half-written dataset under the final names.
//
// The tokens stream through a buffer to the .bin; the index (4 bytes per sequence and 8
// per document) stays in memory until Finish. A Writer is not safe for concurrent use.
type Writer struct {
	prefix  string
	dt      DType
	bin     *os.File // the temporary .bin; nil once closed
	binTmp  string   // its name; "" once renamed into place
	buf     *bufio.Writer
	scratch []byte  // one document's encoded tokens, reused
	lengths []int32 // tokens per sequence
	docs    []int64 // document indices, starting with 0
	tokens  int64
	err     error // the first write error, returned by every later call
	done    bool  // Finish or Abort was called
}

// Create starts writing the dataset PREFIX.bin + PREFIX.idx with tokens of dtype dt
// ([OptimalDType] gives the one Megatron chooses for a vocabulary). The prefix's directory
// must exist; existing files under the final names are replaced only by a successful
// [Writer.Finish].
func Create(prefix string, dt DType) (*Writer, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("indexed: %s: unknown dtype code %d (known: %s)", prefix, uint8(dt), knownCodes)
	}
	for _, ext := range []string{".bin", ".idx"} {
		if base, ok := strings.CutSuffix(prefix, ext); ok {
			return nil, fmt.Errorf("indexed: %s: the prefix ends in %s, which would write %s%s and %s.idx: pass the prefix without extension, %q",
				prefix, ext, prefix, ".bin", prefix, base)
		}
	}
	if prefix == "" || strings.HasSuffix(prefix, string(filepath.Separator)) {
		return nil, fmt.Errorf("indexed: %q is not a file prefix: pass DIR/NAME to write DIR/NAME.bin and DIR/NAME.idx", prefix)
	}
	dir := filepath.Dir(prefix)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("indexed: creating %s.bin: %s is not a directory: create it first", prefix, dir)
	}
	bin, err := os.CreateTemp(dir, filepath.Base(prefix)+".bin.tmp-*")
	if err != nil {
		return nil, fmt.Errorf("indexed: creating %s.bin: %w", prefix, err)
	}
	return &Writer{
		prefix: prefix,
		dt:     dt,
		bin:    bin,
		binTmp: bin.Name(),
		buf:    bufio.NewWriterSize(bin, writeBuffer),
		docs:   []int64{0},
	}, nil
}

// AddDocument appends one document: tokens, split into sequences of seqLens tokens
// (Megatron's add_document(tokens, lengths); preprocess_data.py makes one sequence per
// sentence with --split-sentences, else one per document). seqLens must sum to
// len(tokens); nil means one sequence of all the tokens, or none for an empty document.
// The document's index entry is the number of sequences so far, so an empty document
// repeats the previous entry.
//
// A token the dtype cannot hold (see [DType.TokenRange]) or inconsistent seqLens give an
// error and leave the Writer as it was, so the caller may skip the document and go on. A
// write error is returned by this and every later call.
func (w *Writer) AddDocument(tokens []int32, seqLens []int) error {
	if w.done {
		return fmt.Errorf("indexed: %s: AddDocument after Finish or Abort", w.prefix)
	}
	if w.err != nil {
		return w.err
	}
	var one [1]int
	if seqLens == nil && len(tokens) > 0 {
		one[0] = len(tokens)
		seqLens = one[:]
	}
	sum := 0
	for i, l := range seqLens {
		if l < 0 || l > math.MaxInt32 {
			return fmt.Errorf("indexed: %s: document %d: sequence %d has length %d, outside [0, 2^31): split it", w.prefix, w.Documents(), i, l)
		}
		sum += l
	}
	if sum != len(tokens) {
		return fmt.Errorf("indexed: %s: document %d: the sequence lengths sum to %d, the document has %d tokens", w.prefix, w.Documents(), sum, len(tokens))
	}
	if i := w.encode(tokens); i >= 0 {
		lo, hi := w.dt.TokenRange()
		return fmt.Errorf("indexed: %s: document %d: token %d (position %d) does not fit %s, which holds [%d, %d]: write the dataset with a wider dtype (int32 holds every token id; Megatron picks uint16 only for vocabularies under 65500)",
			w.prefix, w.Documents(), tokens[i], i, w.dt, lo, hi)
	}
	if _, err := w.buf.Write(w.scratch); err != nil {
		w.err = fmt.Errorf("indexed: writing %s: %w", w.bin.Name(), err)
		return w.err
	}
	for _, l := range seqLens {
		w.lengths = append(w.lengths, int32(l))
	}
	w.docs = append(w.docs, int64(len(w.lengths)))
	w.tokens += int64(len(tokens))
	return nil
}

// encode writes tokens into w.scratch as little-endian values of w.dt and returns -1, or
// the position of the first token the dtype cannot hold.
func (w *Writer) encode(tokens []int32) int {
	size := w.dt.Size()
	if cap(w.scratch) < size*len(tokens) {
		w.scratch = make([]byte, size*len(tokens))
	}
	b := w.scratch[:size*len(tokens)]
	w.scratch = b
	le := binary.LittleEndian
	lo, hi := w.dt.TokenRange()
	for i, t := range tokens {
		if t < lo || t > hi {
			return i
		}
		switch w.dt {
		case Uint8, Int8:
			b[i] = byte(t)
		case Int16, Uint16:
			le.PutUint16(b[2*i:], uint16(t))
		case Int32:
			le.PutUint32(b[4*i:], uint32(t))
		case Int64:
			le.PutUint64(b[8*i:], uint64(int64(t)))
		case Float32:
			le.PutUint32(b[4*i:], math.Float32bits(float32(t)))
		case Float64:
			le.PutUint64(b[8*i:], math.Float64bits(float64(t)))
		}
	}
	return -1
}

// Tokens returns the number of tokens added.
func (w *Writer) Tokens() int64 { return w.tokens }

// Documents returns the number of documents added.
func (w *Writer) Documents() int { return len(w.docs) - 1 }

// Finish writes the index, syncs both files to disk and renames them to PREFIX.bin and
// PREFIX.idx: an existing PREFIX.idx is removed first, then the .bin and last the .idx
// are renamed into place, so an interruption leaves either the old dataset, or a .bin
// without its .idx (which [Open] reports), never a .idx describing another .bin. On
// failure the temporary files are removed and the error is returned.
func (w *Writer) Finish() error {
	if w.done {
		return fmt.Errorf("indexed: %s: Finish after Finish or Abort", w.prefix)
	}
	if err := w.finish(); err != nil {
		w.Abort()
		return err
	}
	w.done = true
	return nil
}

func (w *Writer) finish() error {
	if w.err != nil {
		return w.err
	}
	binTmp := w.binTmp
	bin := w.bin
	w.bin = nil
	if err := closeSynced(bin, w.buf); err != nil {
		return err
	}
	idx, err := os.CreateTemp(filepath.Dir(w.prefix), filepath.Base(w.prefix)+".idx.tmp-*")
	if err != nil {
		return fmt.Errorf("indexed: creating %s.idx: %w", w.prefix, err)
	}
	idxTmp := idx.Name()
	if err := closeSynced(idx, w.writeIndex(bufio.NewWriterSize(idx, writeBuffer))); err != nil {
		os.Remove(idxTmp)
		return err
	}
	for _, tmp := range []string{binTmp, idxTmp} {
		if err := os.Chmod(tmp, 0o644); err != nil {
			os.Remove(idxTmp)
			return fmt.Errorf("indexed: %w", err)
		}
	}
	if err := os.Remove(w.prefix + ".idx"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(idxTmp)
		return fmt.Errorf("indexed: replacing the existing index: %w", err)
	}
	if err := os.Rename(binTmp, w.prefix+".bin"); err != nil {
		os.Remove(idxTmp)
		return fmt.Errorf("indexed: %w", err)
	}
	w.binTmp = ""
	if err := os.Rename(idxTmp, w.prefix+".idx"); err != nil {
		os.Remove(idxTmp)
		return fmt.Errorf("indexed: %w (%s.bin is written, its index is missing)", err, w.prefix)
	}
	syncDir(filepath.Dir(w.prefix))
	return nil
}

// writeIndex writes the .idx into buf and returns buf for closeSynced to flush.
func (w *Writer) writeIndex(buf *bufio.Writer) *bufio.Writer {
	var b [8]byte
	le := binary.LittleEndian
	buf.WriteString(magic)
	le.PutUint64(b[:], version)
	buf.Write(b[:])
	buf.WriteByte(byte(w.dt))
	le.PutUint64(b[:], uint64(len(w.lengths)))
	buf.Write(b[:])
	le.PutUint64(b[:], uint64(len(w.docs)))
	buf.Write(b[:])
	for _, l := range w.lengths {
		le.PutUint32(b[:], uint32(l))
		buf.Write(b[:4])
	}
	size, p := int64(w.dt.Size()), int64(0)
	for _, l := range w.lengths {
		le.PutUint64(b[:], uint64(p))
		buf.Write(b[:])
		p += int64(l) * size
	}
	for _, d := range w.docs {
		le.PutUint64(b[:], uint64(d))
		buf.Write(b[:])
	}
	return buf // a bufio.Writer keeps its first error and returns it from Flush
}

// closeSynced flushes buf into f, syncs f to disk and closes it.
func closeSynced(f *os.File, buf *bufio.Writer) error {
	err := buf.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("indexed: writing %s: %w", f.Name(), err)
	}
	return nil
}

// syncDir makes the renames in dir durable where the file system supports syncing a
// directory (best effort: the files themselves are already synced).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Abort stops writing and removes the temporary files. It does nothing after Finish or
// an earlier Abort, so `defer w.Abort()` is safe next to a Finish.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.bin != nil {
		w.bin.Close()
		w.bin = nil
	}
	if w.binTmp != "" {
		os.Remove(w.binTmp)
		w.binTmp = ""
	}
}
