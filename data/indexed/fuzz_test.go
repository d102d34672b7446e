package indexed

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpen writes the fuzz bytes as a .idx, with a .bin of the given bytes or, when
// matchBin is set, of the size the index's lengths promise (so that the checks after the
// .bin's size are reached). Open must return a one-line error or a dataset whose every
// sequence reads back, never panic.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	seedDocs := map[DType][]doc{
		Uint16:  goodDocs,
		Int32:   {{[]int32{70000, -3}, []int{1, 1}}, {}, {nil, []int{0}}},
		Uint8:   {{[]int32{255}, nil}},
		Float32: {{[]int32{1, 2, 3}, []int{0, 3, 0}}},
		Int64:   nil,
	}
	for dt, docs := range seedDocs {
		prefix := filepath.Join(dir, dt.String())
		writeDocs(f, prefix, dt, docs)
		idx, _ := os.ReadFile(prefix + ".idx")
		bin, _ := os.ReadFile(prefix + ".bin")
		f.Add(idx, bin, false)
		f.Add(idx, bin[:len(bin)/2], true)
		f.Add(idx[:len(idx)-3], bin, false)
		f.Add(append(idx, 0, 0, 0), bin, true)
	}
	f.Add([]byte(magic), []byte{}, true)
	f.Add([]byte("MMIDIDX\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x01\x00\x00\x00\x00\x00\x00\x00"), []byte{}, true)
	f.Fuzz(func(t *testing.T, idx, bin []byte, matchBin bool) {
		if matchBin {
			bin = promisedBin(idx, bin)
		}
		prefix := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(prefix+".idx", idx, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prefix+".bin", bin, 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := Open(prefix)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, prefix+".idx: ") {
				t.Fatalf("error %q: want one line naming the index", msg)
			}
			return
		}
		defer ds.Close()
		var total int64
		for i, l := range ds.SequenceLengths() {
			if got := ds.Tokens(nil, i, 0, int(l)); len(got) != int(l) {
				t.Fatalf("sequence %d: %d tokens, want %d", i, len(got), l)
			}
			total += int64(l)
		}
		docs := ds.DocumentIndices()
		if total != ds.NumTokens() || total*int64(ds.DType().Size()) != int64(len(bin)) || docs[0] != 0 || docs[len(docs)-1] != int64(ds.NumSequences()) {
			t.Fatalf("accepted an inconsistent dataset: %d tokens (NumTokens %d), .bin %d bytes, documents %v", total, ds.NumTokens(), len(bin), docs)
		}
		ds.CheckTokens(1000)
	})
}

// promisedBin returns a .bin of the size idx's lengths add up to (bytes of bin, then
// zeros), or bin when idx is too short or promises more than 1 MiB.
func promisedBin(idx, bin []byte) []byte {
	if len(idx) < headerSize || !DType(idx[offDType]).Valid() {
		return bin
	}
	s := binary.LittleEndian.Uint64(idx[offNumSeqs:])
	if s > uint64(len(idx)-headerSize)/lengthSize {
		return bin
	}
	var n int64
	for i := range int(s) {
		n += int64(int32(binary.LittleEndian.Uint32(idx[headerSize+lengthSize*i:])))
	}
	n *= int64(DType(idx[offDType]).Size())
	if n < 0 || n > 1<<20 {
		return bin
	}
	out := make([]byte, n)
	copy(out, bin)
	return out
}
