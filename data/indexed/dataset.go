package indexed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sort"
	"strings"
)

// Dataset is an opened indexed dataset, PREFIX.idx and PREFIX.bin, both memory-mapped
// read-only and validated on [Open]. Its methods may be called from several goroutines at
// once; none may be called after [Dataset.Close].
type Dataset struct {
	prefix   string
	idx, bin mapping
	index
}

// Open opens the indexed dataset PREFIX.idx + PREFIX.bin (the prefix Megatron's
// --data-path takes, without extension) and validates it completely: the header (magic,
// version 1, a known dtype code), the counts against the file's size (no truncation, no
// trailing bytes), every sequence length (≥ 0) and pointer (pointer[0] = 0,
// pointer[i] = pointer[i−1] + length[i−1]·size), the document indices (0 first, never
// decreasing, the last equal to the sequence count) and the .bin's size (the last pointer
// plus the last length·size). The tokens themselves are not read; see
// [Dataset.CheckTokens].
//
// A multimodal index (one int8 sequence mode per sequence after the document indices) is
// refused with an error saying so. Every error is one line naming the file, what is wrong
// and the fix.
func Open(prefix string) (*Dataset, error) {
	idxPath, binPath := prefix+".idx", prefix+".bin"
	if err := checkFiles(prefix); err != nil {
		return nil, err
	}
	d := &Dataset{prefix: prefix}
	var err error
	if d.idx, err = mapFile(idxPath); err != nil {
		return nil, err
	}
	if d.bin, err = mapFile(binPath); err != nil {
		d.idx.unmap()
		return nil, err
	}
	if d.index, err = parseIndex(d.idx.data, idxPath, binPath, int64(len(d.bin.data))); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// checkFiles makes sure PREFIX.idx and PREFIX.bin are regular files and, when they are
// not, says which is missing and what --data-path expects.
func checkFiles(prefix string) error {
	idxPath, binPath := prefix+".idx", prefix+".bin"
	idxErr, binErr := statFile(idxPath), statFile(binPath)
	for _, err := range []error{idxErr, binErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if idxErr == nil && binErr == nil {
		return nil
	}
	const pair = "an indexed dataset is a PREFIX.idx and PREFIX.bin pair written by gotron preprocess or Megatron's preprocess_data.py"
	for _, ext := range []string{".idx", ".bin"} {
		if base, ok := strings.CutSuffix(prefix, ext); ok && base != "" {
			return fmt.Errorf("%s: no such file: --data-path takes the prefix without extension; pass %q (for %s.idx and %s.bin)",
				missing(idxErr, idxPath, binPath), base, base, base)
		}
	}
	if st, err := os.Stat(prefix); err == nil && st.IsDir() {
		return fmt.Errorf("%s: a directory, not the prefix of an indexed dataset (%s.idx and %s.bin do not exist): --data-path takes a file prefix such as DIR/NAME_text_document; %s",
			prefix, prefix, prefix, pair)
	}
	switch {
	case idxErr != nil && binErr != nil:
		return fmt.Errorf("%s and %s: no such files: --data-path takes the prefix of an indexed dataset without extension; %s",
			idxPath, binPath, pair)
	case idxErr != nil:
		return fmt.Errorf("%s: no such file (%s exists): %s; write both again", idxPath, binPath, pair)
	default:
		return fmt.Errorf("%s: no such file (%s exists): %s; write both again", binPath, idxPath, pair)
	}
}

// missing names the first missing file.
func missing(idxErr error, idxPath, binPath string) string {
	if idxErr != nil {
		return idxPath
	}
	return binPath
}

// statFile returns nil for a regular file, an error wrapping fs.ErrNotExist for a missing
// one and a one-line error for anything else.
func statFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s: a directory, not a file: pass the prefix of an indexed dataset's .idx and .bin files", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%s): pass the prefix of an indexed dataset's .idx and .bin files", path, st.Mode().Type())
	}
	return nil
}

// Close unmaps both files. The slices the Dataset handed out must not be used afterwards.
func (d *Dataset) Close() error {
	d.index = index{}
	err1 := d.idx.unmap()
	err2 := d.bin.unmap()
	return errors.Join(err1, err2)
}

// Prefix returns the prefix the dataset was opened with.
func (d *Dataset) Prefix() string { return d.prefix }

// DType returns the dtype of the tokens in the .bin.
func (d *Dataset) DType() DType { return d.dtype }

// NumSequences returns S, the number of sequences.
func (d *Dataset) NumSequences() int { return len(d.lengths) }

// NumDocuments returns the number of documents, len(DocumentIndices()) − 1.
func (d *Dataset) NumDocuments() int { return len(d.docs) - 1 }

// SequenceLengths returns the tokens per sequence, [S]. It aliases the mapping: do not
// modify it.
func (d *Dataset) SequenceLengths() []int32 { return d.lengths }

// SequencePointers returns each sequence's byte offset in the .bin, [S]. It aliases the
// mapping: do not modify it.
func (d *Dataset) SequencePointers() []int64 { return d.pointers }

// DocumentIndices returns the document boundaries, [documents + 1]: document j is
// sequences [DocumentIndices()[j], DocumentIndices()[j+1]); the first entry is 0, the last
// S, and an empty document repeats its predecessor's entry. It aliases the mapping: do not
// modify it.
func (d *Dataset) DocumentIndices() []int64 { return d.docs }

// NumTokens returns the number of tokens in the .bin, the sum of the sequence lengths.
func (d *Dataset) NumTokens() int64 { return d.numTokens }

// Tokens appends tokens [offset, offset+n) of sequence seq to dst as int32 and returns the
// extended slice (Megatron's get(seq, offset, n)). Tokens of the 8- and 16-bit dtypes and
// int32 convert exactly; int64, float32 and float64 ones convert as Go's conversion to
// int32 does, so a value outside int32 (or a fractional one) is not preserved
// ([Dataset.CheckTokens] finds those). It panics when seq is not in [0, S) or
// [offset, offset+n) is not within the sequence: that is a caller's bug.
func (d *Dataset) Tokens(dst []int32, seq, offset, n int) []int32 {
	if seq < 0 || seq >= len(d.lengths) {
		panic(fmt.Sprintf("indexed: %s: sequence %d out of range [0, %d)", d.prefix, seq, len(d.lengths)))
	}
	l := int(d.lengths[seq])
	if offset < 0 || n < 0 || offset > l-n {
		panic(fmt.Sprintf("indexed: %s: tokens [%d, %d+%d) out of range of sequence %d's %d tokens", d.prefix, offset, offset, n, seq, l))
	}
	size := d.dtype.Size()
	start := int(d.pointers[seq]) + offset*size
	old := len(dst)
	dst = append(dst, make([]int32, n)...)
	decode(dst[old:], d.bin.data[start:start+n*size], d.dtype)
	return dst
}

// decode converts len(dst) little-endian tokens of dtype dt from b to int32.
func decode(dst []int32, b []byte, dt DType) {
	le := binary.LittleEndian
	switch dt {
	case Uint8:
		for i, v := range b[:len(dst)] {
			dst[i] = int32(v)
		}
	case Int8:
		for i, v := range b[:len(dst)] {
			dst[i] = int32(int8(v))
		}
	case Int16:
		for i := range dst {
			dst[i] = int32(int16(le.Uint16(b[2*i:])))
		}
	case Uint16:
		for i := range dst {
			dst[i] = int32(le.Uint16(b[2*i:]))
		}
	case Int32:
		for i := range dst {
			dst[i] = int32(le.Uint32(b[4*i:]))
		}
	case Int64:
		for i := range dst {
			dst[i] = int32(int64(le.Uint64(b[8*i:])))
		}
	case Float32:
		for i := range dst {
			dst[i] = int32(math.Float32frombits(le.Uint32(b[4*i:])))
		}
	case Float64:
		for i := range dst {
			dst[i] = int32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	}
}

// value returns the token at byte offset p of the .bin as a float64 (exact for every
// value up to 2⁵³ in magnitude).
func (d *Dataset) value(p int) float64 {
	b, le := d.bin.data[p:], binary.LittleEndian
	switch d.dtype {
	case Uint8:
		return float64(b[0])
	case Int8:
		return float64(int8(b[0]))
	case Int16:
		return float64(int16(le.Uint16(b)))
	case Uint16:
		return float64(le.Uint16(b))
	case Int32:
		return float64(int32(le.Uint32(b)))
	case Int64:
		return float64(int64(le.Uint64(b)))
	case Float32:
		return float64(math.Float32frombits(le.Uint32(b)))
	default:
		return math.Float64frombits(le.Uint64(b))
	}
}

// CheckTokens reads every token of the .bin and returns an error naming the first one
// that is not an integer in [0, vocab): its sequence, its position in the sequence and its
// byte offset. It reads the whole .bin once.
func (d *Dataset) CheckTokens(vocab int) error {
	size := d.dtype.Size()
	limit := float64(vocab)
	for p := 0; p < len(d.bin.data); p += size {
		v := d.value(p)
		if v >= 0 && v < limit && v == math.Trunc(v) {
			continue
		}
		// The last sequence starting at or before p holds it: an empty sequence before it
		// shares its pointer, one after it starts after p.
		seq := sort.Search(len(d.pointers), func(i int) bool { return d.pointers[i] > int64(p) }) - 1
		return fmt.Errorf("%s: token %v at position %d of sequence %d (byte %d) is not a token id of a vocabulary of %d: the dataset was tokenized with another tokenizer; pass the tokenizer it was written with, or preprocess the data again",
			d.prefix+".bin", v, (int64(p)-d.pointers[seq])/int64(size), seq, p, vocab)
	}
	return nil
}
