package data

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkOneLine fails unless err's message is one non-empty line that names
// the flag the path came from, --text-data-path, or the dataset.
func checkOneLine(t *testing.T, what string, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("%s: the error must be one non-empty line, got %q", what, msg)
	}
	if !strings.HasPrefix(msg, "--text-data-path") && !strings.HasPrefix(msg, "text dataset") {
		t.Fatalf("%s: the error names neither --text-data-path nor the text dataset: %q", what, msg)
	}
}

// FuzzTextDataset writes the fuzzed bytes to a file, loads it with
// LoadTextCorpus and cuts it into rows of 1 to 64 tokens with
// NewTextDataset. Neither may panic, and their errors must be one line.
// A file with text and no NUL byte must load as one document of exactly
// its bytes; a file with a NUL byte, or an empty one, must be refused as a
// corpus with no text. A dataset must exist exactly when the file holds at
// least seq bytes (seq+1 tokens with the end-of-document token), with
// len/seq samples, and its rows must be windows of the file whose labels
// are the inputs shifted by one.
func FuzzTextDataset(f *testing.F) {
	for _, s := range []struct {
		text string
		seq  int
	}{
		{"", 1},
		{"\x00", 1},
		{"\x00\x00\x00\x00", 4},
		{"text\x00binary", 2},
		{"package main\n\nfunc main() {}\n", 8},
		{"package main\n\nfunc main() {}\n", 64},
		{"x", 1},
		{"x", 2},
		{"\xff\xfe invalid UTF-8 \xc3", 3},
		{"\n", 1},
		{strings.Repeat("ab", 40), 64},
	} {
		f.Add([]byte(s.text), s.seq, uint64(1234))
	}
	// One file per process, rewritten by every input: a process runs its
	// inputs one at a time, and a directory per input would cost more than
	// the loading it tests.
	path := filepath.Join(f.TempDir(), "corpus.txt")
	f.Fuzz(func(t *testing.T, text []byte, seq int, seed uint64) {
		seq = int(uint(seq-1)%64) + 1
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadTextCorpus([]string{path}, nil)
		binary := bytes.IndexByte(text, byte(EndOfDocument)) >= 0
		if len(text) == 0 || binary {
			if err == nil {
				t.Fatalf("%d bytes (NUL byte: %v) loaded as a corpus of %d documents, want the error for no text", len(text), binary, len(c.Docs))
			}
			checkOneLine(t, "LoadTextCorpus", err)
			if !strings.Contains(err.Error(), "no text found") {
				t.Fatalf("%d bytes (NUL byte: %v): %v, want the error for no text", len(text), binary, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%d bytes of text: %v", len(text), err)
		}
		if len(c.Docs) != 1 || c.Docs[0].Name != "corpus.txt" || !bytes.Equal(c.Docs[0].Text, text) || len(c.Skipped) != 0 {
			t.Fatalf("%d bytes of text loaded as %d documents (skipped %v)", len(text), len(c.Docs), c.Skipped)
		}
		d, err := NewTextDataset(c, seq, seed)
		if len(text) < seq {
			if err == nil {
				t.Fatalf("%d bytes, seq %d: a dataset of %d samples, want an error (one sample needs seq+1 tokens)", len(text), seq, d.NumSamples())
			}
			checkOneLine(t, "NewTextDataset", err)
			return
		}
		if err != nil {
			t.Fatalf("%d bytes, seq %d: %v", len(text), seq, err)
		}
		if n := d.NumSamples(); n != len(text)/seq || n < 1 {
			t.Fatalf("%d bytes, seq %d: %d samples, want %d", len(text), seq, n, len(text)/seq)
		}
		stream := append(bytes.Clone(text), byte(EndOfDocument))
		const rows = 3
		for step := 0; step < 2; step++ {
			b := d.Batch(ConstantStep(step, rows), 0, rows)
			for r := 0; r < rows; r++ {
				k := d.SampleIndex(ConstantStep(step, rows), r)
				in, lab := b.InputIDs[r*seq:(r+1)*seq], b.Labels[r*seq:(r+1)*seq]
				for i := 0; i < seq; i++ {
					if in[i] != int32(stream[k*seq+i]) || lab[i] != int32(stream[k*seq+i+1]) {
						t.Fatalf("%d bytes, seq %d: step %d row %d (sample %d) position %d: input %d, label %d; want %d, %d",
							len(text), seq, step, r, k, i, in[i], lab[i], stream[k*seq+i], stream[k*seq+i+1])
					}
				}
			}
		}
	})
}
