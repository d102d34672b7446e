package indexed

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// doc is one document as the tests model it: its tokens and the lengths passed to
// AddDocument (nil: one sequence of all tokens, none when empty).
type doc struct {
	tokens []int32
	lens   []int
}

// seqs returns the document's sequences as the format stores them.
func (d doc) seqs() [][]int32 {
	lens := d.lens
	if lens == nil && len(d.tokens) > 0 {
		lens = []int{len(d.tokens)}
	}
	var out [][]int32
	at := 0
	for _, l := range lens {
		out = append(out, d.tokens[at:at+l])
		at += l
	}
	return out
}

// writeDocs writes docs as the dataset prefix with dtype dt and fails the test on error.
func writeDocs(t testing.TB, prefix string, dt DType, docs []doc) {
	t.Helper()
	w, err := Create(prefix, dt)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for i, d := range docs {
		if err := w.AddDocument(d.tokens, d.lens); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// randomDocs returns n documents of tokens in dt's range, with empty documents (both
// kinds), single-sequence ones (nil lengths) and multi-sequence ones with empty
// sequences among them.
func randomDocs(rng *rand.Rand, dt DType, n, maxLen int) []doc {
	lo, hi := dt.TokenRange()
	docs := make([]doc, n)
	for i := range docs {
		var d doc
		switch rng.IntN(6) {
		case 0: // empty, no sequence
		case 1: // one empty sequence
			d.lens = []int{0}
		case 2, 3: // one sequence, nil lengths
			d.tokens = make([]int32, 1+rng.IntN(maxLen))
		default: // several sequences, some empty
			for range 1 + rng.IntN(5) {
				d.lens = append(d.lens, rng.IntN(maxLen/4+1))
			}
			sum := 0
			for _, l := range d.lens {
				sum += l
			}
			d.tokens = make([]int32, sum)
		}
		for j := range d.tokens {
			switch rng.IntN(20) {
			case 0:
				d.tokens[j] = lo
			case 1:
				d.tokens[j] = hi
			default:
				d.tokens[j] = int32(int64(lo) + rng.Int64N(int64(hi)-int64(lo)+1))
			}
		}
		docs[i] = d
	}
	return docs
}

// checkDataset compares an opened dataset with the documents written, from the model
// alone: sequences, lengths, pointers (running sums · size), document indices, tokens.
func checkDataset(t *testing.T, ds *Dataset, dt DType, docs []doc) {
	t.Helper()
	if ds.DType() != dt {
		t.Fatalf("DType %v, want %v", ds.DType(), dt)
	}
	var seqs [][]int32
	wantDocs := []int64{0}
	for _, d := range docs {
		seqs = append(seqs, d.seqs()...)
		wantDocs = append(wantDocs, int64(len(seqs)))
	}
	if ds.NumSequences() != len(seqs) || len(ds.SequenceLengths()) != len(seqs) || len(ds.SequencePointers()) != len(seqs) {
		t.Fatalf("%d sequences (%d lengths, %d pointers), want %d", ds.NumSequences(), len(ds.SequenceLengths()), len(ds.SequencePointers()), len(seqs))
	}
	if !slices.Equal(ds.DocumentIndices(), wantDocs) {
		t.Fatalf("document indices %v, want %v", ds.DocumentIndices(), wantDocs)
	}
	if ds.NumDocuments() != len(docs) {
		t.Fatalf("NumDocuments %d, want %d", ds.NumDocuments(), len(docs))
	}
	var p, total int64
	for i, s := range seqs {
		if int(ds.SequenceLengths()[i]) != len(s) || ds.SequencePointers()[i] != p {
			t.Fatalf("sequence %d: length %d pointer %d, want %d and %d", i, ds.SequenceLengths()[i], ds.SequencePointers()[i], len(s), p)
		}
		if got := ds.Tokens(nil, i, 0, len(s)); !slices.Equal(got, s) {
			t.Fatalf("sequence %d: tokens %v, want %v", i, got, s)
		}
		p += int64(len(s) * dt.Size())
		total += int64(len(s))
	}
	if ds.NumTokens() != total {
		t.Fatalf("NumTokens %d, want %d", ds.NumTokens(), total)
	}
}

// names returns the names in dir, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// openT opens prefix and fails the test on error; the dataset is closed at cleanup.
func openT(t *testing.T, prefix string) *Dataset {
	t.Helper()
	ds, err := Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

var allDTypes = []DType{Uint8, Int8, Int16, Int32, Int64, Float64, Float32, Uint16}

func tmpPrefix(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }
