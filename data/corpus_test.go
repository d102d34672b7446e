package data

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTree creates files (path → content) under a new temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func docNames(c *Corpus) []string {
	var names []string
	for _, d := range c.Docs {
		names = append(names, d.Name)
	}
	return names
}

func TestLoadTextCorpus(t *testing.T) {
	root := writeTree(t, map[string]string{
		"corpus/b.go":           "package b",
		"corpus/a.txt":          "hello",
		"corpus/sub/c.go":       "package c",
		"corpus/sub/d.md":       "# d",
		"corpus/.git/x.go":      "hidden dir",
		"corpus/bin.go":         "bin\x00ary",
		"corpus/.hidden.go":     "hidden file, not a hidden dir",
		"corpus/deep/er/e.go":   "package e",
		"single/notes.markdown": "single file",
	})
	dir := filepath.Join(root, "corpus")
	c, err := LoadTextCorpus([]string{dir}, []string{"go", ".txt"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"corpus/.hidden.go", "corpus/a.txt", "corpus/b.go", "corpus/deep/er/e.go", "corpus/sub/c.go"}
	if got := docNames(c); !reflect.DeepEqual(got, want) {
		t.Errorf("docs %v, want %v", got, want)
	}
	if len(c.Skipped) != 1 || !strings.HasSuffix(c.Skipped[0], "bin.go") {
		t.Errorf("skipped %v", c.Skipped)
	}
	if n := c.NumBytes(); n != int64(len("package b")+len("hello")+len("package c")+len("package e")+len("hidden file, not a hidden dir")) {
		t.Errorf("NumBytes = %d", n)
	}
	// Every extension; a file given directly is loaded whatever its extension; order kept.
	file := filepath.Join(root, "single", "notes.markdown")
	c, err = LoadTextCorpus([]string{file, dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"notes.markdown", "corpus/.hidden.go", "corpus/a.txt", "corpus/b.go", "corpus/deep/er/e.go", "corpus/sub/c.go", "corpus/sub/d.md"}
	if got := docNames(c); !reflect.DeepEqual(got, want) {
		t.Errorf("docs %v, want %v", got, want)
	}
	if string(c.Docs[0].Text) != "single file" {
		t.Errorf("text %q", c.Docs[0].Text)
	}
	// Names do not depend on how the directory is spelled.
	t.Chdir(dir)
	c2, err := LoadTextCorpus([]string{"."}, []string{"go", ".txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := docNames(c2); !reflect.DeepEqual(got, []string{"corpus/.hidden.go", "corpus/a.txt", "corpus/b.go", "corpus/deep/er/e.go", "corpus/sub/c.go"}) {
		t.Errorf("relative path gives names %v", got)
	}
}

func TestStream(t *testing.T) {
	c := &Corpus{Docs: []Document{{"a", []byte("ab")}, {"b", nil}, {"c", []byte("c")}}}
	if got := c.Stream(); string(got) != "ab\x00\x00c\x00" {
		t.Errorf("Stream = %q", got)
	}
}

func TestLoadTextCorpusErrors(t *testing.T) {
	root := writeTree(t, map[string]string{"d/empty.txt": "", "d/x.bin": "\x00\x01", "d/y.go": "package y"})
	missing := filepath.Join(root, "nope")
	cases := []struct {
		paths, exts []string
		want        string
	}{
		{[]string{missing}, nil, "--text-data-path " + missing + ": no such file or directory: pass an existing file or directory"},
		{[]string{filepath.Join(root, "d")}, []string{"txt", "bin"}, "--text-data-path " + filepath.Join(root, "d") + ": no text found (0 bytes in 2 files, 1 of them skipped as binary because they contain NUL bytes)"},
		{[]string{filepath.Join(root, "d")}, []string{"rs"}, "no text found (0 bytes in 0 files): pass files or directories that contain text files (extensions searched: .rs)"},
		{nil, nil, "no path given"},
	}
	for _, c := range cases {
		_, err := LoadTextCorpus(c.paths, c.exts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadTextCorpus(%v, %v) error %v\nwant %q", c.paths, c.exts, err, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	c := &Corpus{Source: "test"}
	for i := 0; i < 400; i++ {
		c.Docs = append(c.Docs, Document{Name: fmt.Sprintf("pkg%d/file%03d.go", i%7, i), Text: []byte{byte('a' + i%26)}})
	}
	train, valid := c.Split(0.1, 3)
	if len(train.Docs)+len(valid.Docs) != len(c.Docs) {
		t.Fatalf("%d + %d documents, want %d", len(train.Docs), len(valid.Docs), len(c.Docs))
	}
	if n := len(valid.Docs); n < 20 || n > 65 { // 40 expected; binomial sd 6
		t.Errorf("%d valid documents of 400 at fraction 0.1", n)
	}
	inValid := map[string]bool{}
	for _, d := range valid.Docs {
		inValid[d.Name] = true
	}
	for _, d := range train.Docs {
		if inValid[d.Name] {
			t.Errorf("%s in both splits", d.Name)
		}
	}
	// Each side is decided by the name and seed alone, by the documented hash.
	for _, d := range c.Docs {
		h := uint64(14695981039346656037) // FNV-1a 64, written out
		for _, b := range []byte(d.Name) {
			h ^= uint64(b)
			h *= 1099511628211
		}
		u := refSplitmix64(h ^ refSplitmix64(3))
		if want := float64(u>>11)/(1<<53) < 0.1; inValid[d.Name] != want {
			t.Errorf("%s: in valid %v, want %v", d.Name, inValid[d.Name], want)
		}
	}
	// Deterministic; order kept; the subset of a corpus splits consistently.
	t2, v2 := c.Split(0.1, 3)
	if !reflect.DeepEqual(docNames(t2), docNames(train)) || !reflect.DeepEqual(docNames(v2), docNames(valid)) {
		t.Error("Split is not deterministic")
	}
	sub := &Corpus{Docs: c.Docs[100:200]}
	_, vs := sub.Split(0.1, 3)
	for _, d := range vs.Docs {
		if !inValid[d.Name] {
			t.Errorf("%s moved to valid when other files were removed", d.Name)
		}
	}
	// Another seed gives another split.
	_, v3 := c.Split(0.1, 4)
	if reflect.DeepEqual(docNames(v3), docNames(valid)) {
		t.Error("seeds 3 and 4 give the same split")
	}
}

func TestSplitEdges(t *testing.T) {
	two := &Corpus{Docs: []Document{{"a.go", nil}, {"b.go", nil}}}
	for _, f := range []float64{1e-9, 1 - 1e-9} {
		tr, va := two.Split(f, 0)
		if len(tr.Docs) != 1 || len(va.Docs) != 1 {
			t.Errorf("fraction %v: %d train, %d valid; want 1 and 1", f, len(tr.Docs), len(va.Docs))
		}
	}
	tr, va := two.Split(0, 0)
	if len(tr.Docs) != 2 || len(va.Docs) != 0 {
		t.Errorf("fraction 0: %d train, %d valid", len(tr.Docs), len(va.Docs))
	}
	tr, va = two.Split(1, 0)
	if len(tr.Docs) != 0 || len(va.Docs) != 2 {
		t.Errorf("fraction 1: %d train, %d valid", len(tr.Docs), len(va.Docs))
	}
	defer func() {
		if recover() == nil {
			t.Error("Split(1.5) did not panic")
		}
	}()
	two.Split(1.5, 0)
}
