package indexed

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Every dtype: random documents (empty ones of both kinds, multi-sequence ones, the
// dtype's extremes) written and read back.
func TestRoundTrip(t *testing.T) {
	for _, dt := range allDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(dt), 7))
			docs := randomDocs(rng, dt, 60, 50)
			prefix := tmpPrefix(t, "rt_text_document")
			writeDocs(t, prefix, dt, docs)
			checkDataset(t, openT(t, prefix), dt, docs)
		})
	}
}

// The documents of the package doc's example: 2, 0 and 1 sequences give 0, 2, 2, 3.
func TestDocumentIndicesExample(t *testing.T) {
	prefix := tmpPrefix(t, "ex")
	writeDocs(t, prefix, Uint16, []doc{{[]int32{1, 2, 3}, []int{1, 2}}, {}, {[]int32{4}, nil}})
	ds := openT(t, prefix)
	if got := ds.DocumentIndices(); !slices.Equal(got, []int64{0, 2, 2, 3}) {
		t.Fatalf("document indices %v, want [0 2 2 3]", got)
	}
	if got := ds.SequencePointers(); !slices.Equal(got, []int64{0, 2, 6}) {
		t.Fatalf("pointers %v, want [0 2 6]", got)
	}
}

// A dataset of no documents, and one of empty documents only: an empty .bin.
func TestEmptyDatasets(t *testing.T) {
	for name, docs := range map[string][]doc{"none": nil, "empty_docs": {{}, {nil, []int{0}}, {}}} {
		t.Run(name, func(t *testing.T) {
			prefix := tmpPrefix(t, name)
			writeDocs(t, prefix, Int32, docs)
			checkDataset(t, openT(t, prefix), Int32, docs)
		})
	}
}

// A larger corpus crossing the writer's 1 MiB buffer many times: the reader sees exactly
// the tokens written, also through partial reads at every offset of some sequences and
// appended to a non-empty dst.
func TestReaderSeesWrittenTokens(t *testing.T) {
	for _, dt := range []DType{Uint16, Int32} {
		t.Run(dt.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(dt)))
			docs := randomDocs(rng, dt, 3000, 700)
			prefix := tmpPrefix(t, "big_text_document")
			writeDocs(t, prefix, dt, docs)
			ds := openT(t, prefix)
			checkDataset(t, ds, dt, docs)
			var all []int32
			for _, d := range docs {
				all = append(all, d.tokens...)
			}
			// The whole stream, sequence by sequence, appended to one slice.
			var got []int32
			for i := range ds.NumSequences() {
				got = ds.Tokens(got, i, 0, int(ds.SequenceLengths()[i]))
			}
			if !slices.Equal(got, all) {
				t.Fatalf("the %d tokens read differ from the %d written", len(got), len(all))
			}
			seq := 0
			for i, l := range ds.SequenceLengths() {
				if l > ds.SequenceLengths()[seq] {
					seq = i
				}
			}
			want := ds.Tokens(nil, seq, 0, int(ds.SequenceLengths()[seq]))
			prefixTokens := []int32{-7, -8}
			for off := 0; off <= len(want); off++ {
				n := rng.IntN(len(want) - off + 1)
				got := ds.Tokens(slices.Clone(prefixTokens), seq, off, n)
				if !slices.Equal(got[:2], prefixTokens) || !slices.Equal(got[2:], want[off:off+n]) {
					t.Fatalf("Tokens(seq %d, offset %d, n %d) = %v, want %v", seq, off, n, got[2:], want[off:off+n])
				}
			}
		})
	}
}

func TestTokensPanicsOutOfRange(t *testing.T) {
	prefix := tmpPrefix(t, "p")
	writeDocs(t, prefix, Uint16, []doc{{[]int32{1, 2, 3}, nil}, {[]int32{4}, nil}})
	ds := openT(t, prefix)
	for _, c := range [][3]int{{-1, 0, 0}, {2, 0, 0}, {0, -1, 1}, {0, 0, 4}, {0, 2, 2}, {0, 4, 0}, {1, 0, -1}} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "out of range") {
					t.Errorf("Tokens(seq %d, offset %d, n %d): recovered %v, want an out-of-range panic", c[0], c[1], c[2], r)
				}
			}()
			ds.Tokens(nil, c[0], c[1], c[2])
		}()
	}
	if got := ds.Tokens(nil, 0, 3, 0); len(got) != 0 {
		t.Errorf("empty read at the end: %v", got)
	}
}

func TestCheckTokens(t *testing.T) {
	prefix := tmpPrefix(t, "c")
	writeDocs(t, prefix, Int16, []doc{{[]int32{1, 2, 3}, []int{1, 0, 2}}, {}, {[]int32{4, 99, -1}, nil}})
	ds := openT(t, prefix)
	if err := ds.CheckTokens(100); err == nil || !strings.Contains(err.Error(), "token -1 at position 2 of sequence 3 (byte 10)") {
		t.Errorf("vocab 100: %v", err)
	}
	if err := ds.CheckTokens(99); err == nil || !strings.Contains(err.Error(), "token 99 at position 1 of sequence 3 (byte 8) is not a token id of a vocabulary of 99") {
		t.Errorf("vocab 99: %v", err)
	}

	// A fractional float32 token, patched into the .bin.
	prefix = tmpPrefix(t, "f")
	writeDocs(t, prefix, Float32, []doc{{[]int32{5, 6}, nil}, {[]int32{7}, nil}})
	patch(t, prefix+".bin", func(b []byte) []byte { b[8], b[9], b[10], b[11] = 0, 0, 0xc0, 0x3f; return b }) // 1.5
	ds = openT(t, prefix)
	if err := ds.CheckTokens(100); err == nil || !strings.Contains(err.Error(), "token 1.5 at position 0 of sequence 1 (byte 8)") {
		t.Errorf("float32 1.5: %v", err)
	}
}
