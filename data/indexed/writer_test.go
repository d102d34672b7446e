package indexed

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Abort, right after Create or after some documents, leaves the directory as it was.
func TestWriterAbortLeavesNothing(t *testing.T) {
	for _, n := range []int{0, 3} {
		dir := t.TempDir()
		w, err := Create(filepath.Join(dir, "a"), Uint16)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := w.AddDocument([]int32{int32(i), 2}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := names(t, dir); len(got) != 1 || !strings.HasPrefix(got[0], "a.bin.tmp-") {
			t.Fatalf("while writing the directory holds %v, want one a.bin.tmp-*", got)
		}
		w.Abort()
		w.Abort()
		if got := names(t, dir); len(got) != 0 {
			t.Fatalf("after Abort the directory holds %v", got)
		}
		if err := w.AddDocument([]int32{1}, nil); err == nil {
			t.Fatal("AddDocument after Abort succeeded")
		}
		if err := w.Finish(); err == nil {
			t.Fatal("Finish after Abort succeeded")
		}
	}
}

// A Finish replaces an existing dataset; until then the old one stays readable under the
// final names, and a dataset opened before keeps its (unlinked) files.
func TestWriterFinishReplaces(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "d_text_document")
	old := []doc{{[]int32{1, 2, 3}, nil}, {[]int32{4, 5}, []int{1, 1}}}
	writeDocs(t, prefix, Uint16, old)
	before := openT(t, prefix)

	repl := []doc{{[]int32{70000, 9}, nil}, {}, {[]int32{8}, nil}}
	w, err := Create(prefix, Int32)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, d := range repl {
		if err := w.AddDocument(d.tokens, d.lens); err != nil {
			t.Fatal(err)
		}
	}
	// Interrupted here: the old dataset is what Open sees.
	checkDataset(t, openT(t, prefix), Uint16, old)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	w.Abort() // no-op after Finish
	if got := names(t, dir); !slices.Equal(got, []string{"d_text_document.bin", "d_text_document.idx"}) {
		t.Fatalf("the directory holds %v", got)
	}
	for _, ext := range []string{".bin", ".idx"} {
		if st, err := os.Stat(prefix + ext); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, mode %v, want 0644", ext, err, st.Mode())
		}
	}
	checkDataset(t, openT(t, prefix), Int32, repl)
	checkDataset(t, before, Uint16, old)
	if w.Tokens() != 3 || w.Documents() != 3 {
		t.Errorf("Tokens %d Documents %d, want 3 and 3", w.Tokens(), w.Documents())
	}
	if err := w.Finish(); err == nil {
		t.Error("a second Finish succeeded")
	}
}

// A failed Finish (PREFIX.idx is a non-empty directory, which cannot be replaced) removes
// the temporary files and writes nothing under the final names.
func TestWriterFailedFinishRemovesTemporaries(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "f")
	if err := os.MkdirAll(prefix+".idx/x", 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Create(prefix, Uint16)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddDocument([]int32{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Finish: %v, want a one-line error", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"f.idx"}) {
		t.Fatalf("after a failed Finish the directory holds %v, want only the f.idx directory", got)
	}
}

// A document the dtype cannot hold, or with inconsistent lengths, is refused and leaves
// the Writer as it was: the dataset holds the other documents.
func TestAddDocumentRefuses(t *testing.T) {
	for _, dt := range allDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			lo, hi := dt.TokenRange()
			var bad []int32
			if lo > -1<<31 {
				bad = append(bad, lo-1)
			}
			if hi < 1<<31-1 {
				bad = append(bad, hi+1)
			}
			prefix := tmpPrefix(t, "r")
			w, err := Create(prefix, dt)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			good := []doc{{[]int32{lo, hi}, nil}, {[]int32{0, 1, 1}, []int{1, 2}}}
			if err := w.AddDocument(good[0].tokens, nil); err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				err := w.AddDocument([]int32{0, b, 1}, []int{2, 1})
				if err == nil || !strings.Contains(err.Error(), "does not fit "+dt.String()) || !strings.Contains(err.Error(), "(position 1)") {
					t.Errorf("token %d: %v", b, err)
				}
			}
			for _, lens := range [][]int{{1}, {1, 1}, {4}, {-1, 4}, {}} {
				if err := w.AddDocument([]int32{0, 1, 1}, lens); err == nil {
					t.Errorf("lengths %v for 3 tokens accepted", lens)
				}
			}
			if err := w.AddDocument(good[1].tokens, good[1].lens); err != nil {
				t.Fatal(err)
			}
			if w.Documents() != 2 || w.Tokens() != 5 {
				t.Fatalf("Documents %d Tokens %d, want 2 and 5", w.Documents(), w.Tokens())
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			checkDataset(t, openT(t, prefix), dt, good)
		})
	}
}

func TestCreateRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		prefix string
		dt     DType
		want   string
	}{
		{filepath.Join(dir, "x"), 0, "unknown dtype code 0"},
		{filepath.Join(dir, "x"), 9, "unknown dtype code 9"},
		{filepath.Join(dir, "x.bin"), Uint16, `pass the prefix without extension, "` + filepath.Join(dir, "x") + `"`},
		{filepath.Join(dir, "x.idx"), Uint16, "the prefix ends in .idx"},
		{filepath.Join(dir, "missing", "x"), Uint16, filepath.Join(dir, "missing") + " is not a directory: create it first"},
		{"", Uint16, "not a file prefix"},
		{dir + "/", Uint16, "not a file prefix"},
	} {
		w, err := Create(c.prefix, c.dt)
		if err == nil {
			w.Abort()
			t.Errorf("Create(%q, %d) succeeded", c.prefix, c.dt)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Create(%q, %d): %v, want %q", c.prefix, c.dt, err, c.want)
		}
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("refused Creates left %v", got)
	}
}
