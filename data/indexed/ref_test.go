package indexed

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// refFixture is one dataset of testdata/indexed_ref.json, written by
// tools/torchref/indexed_ref.py from the format's specification.
type refFixture struct {
	Prefix    string `json:"prefix"`
	DType     string `json:"dtype"`
	DTypeCode uint8  `json:"dtype_code"`
	Itemsize  int    `json:"itemsize"`
	Documents []struct {
		Tokens  []int32 `json:"tokens"`
		Lengths []int   `json:"lengths"`
	} `json:"documents"`
	SequenceLengths  []int32 `json:"sequence_lengths"`
	SequencePointers []int64 `json:"sequence_pointers"`
	DocumentIndices  []int64 `json:"document_indices"`
	NumTokens        int64   `json:"num_tokens"`
	BinSize          int64   `json:"bin_size"`
	IdxSize          int64   `json:"idx_size"`
}

func loadRef(t *testing.T) []refFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "indexed_ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Fixtures []refFixture `json:"fixtures"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Fixtures) != 8 {
		t.Fatalf("%d fixtures, want one per dtype (8)", len(ref.Fixtures))
	}
	return ref.Fixtures
}

// The reader reads the reference's files as the JSON lists them.
func TestReadReference(t *testing.T) {
	for _, fx := range loadRef(t) {
		t.Run(fx.DType, func(t *testing.T) {
			ds := openT(t, filepath.Join("testdata", fx.Prefix))
			if uint8(ds.DType()) != fx.DTypeCode || ds.DType().String() != fx.DType || ds.DType().Size() != fx.Itemsize {
				t.Fatalf("dtype %v (code %d, %d bytes), want %s (%d, %d)", ds.DType(), uint8(ds.DType()), ds.DType().Size(), fx.DType, fx.DTypeCode, fx.Itemsize)
			}
			if !slices.Equal(ds.SequenceLengths(), fx.SequenceLengths) || !slices.Equal(ds.SequencePointers(), fx.SequencePointers) || !slices.Equal(ds.DocumentIndices(), fx.DocumentIndices) {
				t.Fatalf("lengths %v pointers %v documents %v\nwant %v %v %v", ds.SequenceLengths(), ds.SequencePointers(), ds.DocumentIndices(), fx.SequenceLengths, fx.SequencePointers, fx.DocumentIndices)
			}
			if ds.NumTokens() != fx.NumTokens || ds.NumDocuments() != len(fx.Documents) {
				t.Fatalf("%d tokens, %d documents, want %d and %d", ds.NumTokens(), ds.NumDocuments(), fx.NumTokens, len(fx.Documents))
			}
			// Each document's sequences, cut from its tokens by its lengths.
			seq := 0
			for j, d := range fx.Documents {
				if int(ds.DocumentIndices()[j]) != seq {
					t.Fatalf("document %d starts at sequence %d, want %d", j, ds.DocumentIndices()[j], seq)
				}
				at := 0
				for _, l := range d.Lengths {
					if got := ds.Tokens(nil, seq, 0, l); !slices.Equal(got, d.Tokens[at:at+l]) {
						t.Fatalf("document %d sequence %d: %v, want %v", j, seq, got, d.Tokens[at:at+l])
					}
					at += l
					seq++
				}
			}
		})
	}
}

// The writer, given the JSON's documents, writes the reference's files byte for byte.
func TestWriteReference(t *testing.T) {
	for _, fx := range loadRef(t) {
		t.Run(fx.DType, func(t *testing.T) {
			prefix := tmpPrefix(t, fx.Prefix)
			w, err := Create(prefix, DType(fx.DTypeCode))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			for j, d := range fx.Documents {
				if err := w.AddDocument(d.Tokens, d.Lengths); err != nil {
					t.Fatalf("document %d: %v", j, err)
				}
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			for _, ext := range []string{".bin", ".idx"} {
				got, err := os.ReadFile(prefix + ext)
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join("testdata", fx.Prefix+ext))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: %d bytes differ from the reference's %d (first difference at byte %d)", ext, len(got), len(want), firstDiff(got, want))
				}
			}
			if st, _ := os.Stat(prefix + ".idx"); st.Size() != fx.IdxSize {
				t.Errorf(".idx: %d bytes, the JSON says %d", st.Size(), fx.IdxSize)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
