package preprocess

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
)

// byteTok returns gotron's byte-level tokenizer (end of document: 0).
func byteTok(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New(tokenizer.Options{Type: tokenizer.TypeByteLevel})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// write creates a file under dir with content and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// docsOf reads back an indexed dataset as documents of sequences of tokens.
func docsOf(t *testing.T, prefix string) [][][]int32 {
	t.Helper()
	ds, err := indexed.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	di := ds.DocumentIndices()
	var docs [][][]int32
	for d := 0; d+1 < len(di); d++ {
		var seqs [][]int32
		for s := di[d]; s < di[d+1]; s++ {
			seqs = append(seqs, ds.Tokens(nil, int(s), 0, int(ds.SequenceLengths()[s])))
		}
		docs = append(docs, seqs)
	}
	return docs
}

// ids returns the bytes of s as tokens, plus the given extra ids.
func ids(s string, extra ...int32) []int32 {
	out := make([]int32, 0, len(s)+len(extra))
	for i := 0; i < len(s); i++ {
		out = append(out, int32(s[i]))
	}
	return append(out, extra...)
}

// TestJSONLines: each line is a document; a list value is one sequence per
// element (empty ones dropped); the end-of-document id closes the last
// sequence of a non-empty document; an empty document stays empty; blank
// lines are not documents; every key gets its own dataset.
func TestJSONLines(t *testing.T) {
	dir := t.TempDir()
	in := write(t, dir, "in.jsonl", `{"text": "ab", "title": "T1"}
{"text": ["cd", "", "e"], "title": "T2"}

{"text": "", "title": ""}
{"title": "T4", "text": "héllo\n"}`)
	res, err := Run(context.Background(), Options{Inputs: []string{in}, JSONKeys: []string{"text", "title"},
		OutputPrefix: filepath.Join(dir, "out", "x"), Tokenizer: byteTok(t), AppendEOD: true, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Documents != 4 || res.BlankLines != 1 || res.Files != 1 {
		t.Errorf("result %+v: want 4 documents, 1 blank line, 1 file", res)
	}
	want := [][][]int32{{ids("ab", 0)}, {ids("cd"), ids("e", 0)}, nil, {ids("héllo\n", 0)}}
	got := docsOf(t, filepath.Join(dir, "out", "x_text_document"))
	if !equalDocs(got, want) {
		t.Errorf("text documents %v, want %v", got, want)
	}
	wantTitle := [][][]int32{{ids("T1", 0)}, {ids("T2", 0)}, nil, {ids("T4", 0)}}
	if got := docsOf(t, filepath.Join(dir, "out", "x_title_document")); !equalDocs(got, wantTitle) {
		t.Errorf("title documents %v, want %v", got, wantTitle)
	}
	if res.Tokens != int64(3+4+8+3*3) {
		t.Errorf("tokens %d", res.Tokens)
	}
}

// equalDocs compares documents of sequences.
func equalDocs(a, b [][][]int32) bool {
	return slices.EqualFunc(a, b, func(x, y [][]int32) bool {
		return slices.EqualFunc(x, y, func(p, q []int32) bool { return slices.Equal(p, q) })
	})
}

// TestWorkersAgree: the output does not depend on the number of workers,
// also over many chunks (lines longer than a chunk included).
func TestWorkersAgree(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 3000 {
		n := (i*7919)%900 + 1
		if i == 1500 {
			n = 3 << 20 // a line longer than a chunk
		}
		b.WriteString(`{"text": "` + strings.Repeat(string(rune('a'+i%26)), n) + `"}` + "\n")
	}
	in := write(t, dir, "in.jsonl", b.String())
	var files [][]byte
	for _, w := range []int{1, 2, 5} {
		p := filepath.Join(dir, "w", "x")
		if _, err := Run(context.Background(), Options{Inputs: []string{in}, OutputPrefix: p, Tokenizer: byteTok(t), AppendEOD: true, Workers: w}); err != nil {
			t.Fatal(err)
		}
		for _, ext := range []string{".bin", ".idx"} {
			f, err := os.ReadFile(p + "_text_document" + ext)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	for i := 2; i < len(files); i++ {
		if !slices.Equal(files[i], files[i%2]) {
			t.Errorf("output %d differs from one worker's", i)
		}
	}
	if got := len(docsOf(t, filepath.Join(dir, "w", "x_text_document"))); got != 3000 {
		t.Errorf("%d documents, want 3000", got)
	}
}

// TestBadLines: a line that cannot be read is one error naming the file and
// line, and nothing is written; with SkipBadLines it is skipped and counted.
func TestBadLines(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"text": "a"`, "not valid JSON"},
		{`[1, 2]`, "not an object"},
		{`{"body": "a"}`, `no key "text" (its keys: "body")`},
		{`{"text": 3}`, `key "text" holds 3, not a string`},
		{`{"text": ["a", 1]}`, "not a list of strings"},
	} {
		dir := t.TempDir()
		in := write(t, dir, "in.jsonl", "{\"text\": \"ok\"}\n\n"+c.line+"\n{\"text\": \"ok\"}\n")
		prefix := filepath.Join(dir, "x")
		_, err := Run(context.Background(), Options{Inputs: []string{in}, OutputPrefix: prefix, Tokenizer: byteTok(t), Workers: 2})
		if err == nil || !strings.Contains(err.Error(), in+":3: ") || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--skip-bad-lines") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line naming %s:3 and %q", c.line, err, in, c.want)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "x*")); len(left) != 0 {
			t.Errorf("%s: left %v behind", c.line, left)
		}
		res, err := Run(context.Background(), Options{Inputs: []string{in}, OutputPrefix: prefix, Tokenizer: byteTok(t), Workers: 2, SkipBadLines: true})
		if err != nil || res.BadLines != 1 || res.Documents != 2 {
			t.Errorf("%s with SkipBadLines: %+v, %v; want 1 bad line, 2 documents", c.line, res, err)
		}
	}
}

// TestTextFiles: plain-text files are one document each, in lexical order
// of a directory walk, binary ones skipped; extensions filter directories.
func TestTextFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "src/b.go", "package b")
	write(t, dir, "src/a.go", "package a")
	write(t, dir, "src/c.txt", "not go")
	write(t, dir, "src/bin.go", "x\x00y")
	one := write(t, dir, "one.md", "# one")
	res, err := Run(context.Background(), Options{Inputs: []string{filepath.Join(dir, "src"), one}, Extensions: []string{"go"},
		OutputPrefix: filepath.Join(dir, "out"), Tokenizer: byteTok(t), AppendEOD: true, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := [][][]int32{{ids("package a", 0)}, {ids("package b", 0)}, {ids("# one", 0)}}
	if got := docsOf(t, filepath.Join(dir, "out_text_document")); !equalDocs(got, want) || res.Binary != 1 {
		t.Errorf("documents %v (binary %d), want %v and 1 binary", got, res.Binary, want)
	}
	_, err = Run(context.Background(), Options{Inputs: []string{one}, JSONKeys: []string{"body"}, OutputPrefix: filepath.Join(dir, "o2"), Tokenizer: byteTok(t), Workers: 1})
	if err == nil || !strings.Contains(err.Error(), "--json-keys must be the default text") {
		t.Errorf("text file with --json-keys body: %v", err)
	}
}

// TestCancelLeavesNothing: a cancelled run returns the context's error and
// leaves no output or temporary file.
func TestCancelLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	in := write(t, dir, "in.jsonl", strings.Repeat(`{"text": "abc"}`+"\n", 100000))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Options{Inputs: []string{in}, OutputPrefix: filepath.Join(dir, "out", "x"), Tokenizer: byteTok(t), Workers: 2})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("got %v, want the context's error", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "out", "*")); len(left) != 0 {
		t.Errorf("left %v behind", left)
	}
}

// TestOptionErrors: missing and wrong options name the flag.
func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	in := write(t, dir, "in.jsonl", `{"text": "a"}`)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{OutputPrefix: "x", Workers: 1}, "--input is required"},
		{Options{Inputs: []string{in}, Workers: 1}, "--output-prefix is required"},
		{Options{Inputs: []string{in}, OutputPrefix: "x", Workers: 0}, "--workers 0"},
		{Options{Inputs: []string{in}, OutputPrefix: "x", Workers: 1, JSONKeys: []string{"a", "a"}}, `"a" is given twice`},
		{Options{Inputs: []string{in}, OutputPrefix: "x", Workers: 1, JSONKeys: []string{"a/b"}}, "without '/'"},
		{Options{Inputs: []string{filepath.Join(dir, "missing.jsonl")}, OutputPrefix: filepath.Join(dir, "x"), Workers: 1}, "no such file"},
	} {
		if c.o.Tokenizer == nil {
			c.o.Tokenizer = byteTok(t)
		}
		if _, err := Run(context.Background(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}

// TestNullTokenizerRefusesText: NullTokenizer's text is ids; a document with
// another word is an error naming the line, not a silently shorter document.
func TestNullTokenizerRefusesText(t *testing.T) {
	dir := t.TempDir()
	in := write(t, dir, "in.jsonl", `{"text": "1 2 3"}`+"\n"+`{"text": "4 x 5"}`+"\n")
	tok, err := tokenizer.New(tokenizer.Options{Type: tokenizer.TypeNull, VocabSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Inputs: []string{in}, OutputPrefix: filepath.Join(dir, "x"), Tokenizer: tok, Workers: 1})
	if err == nil || !strings.Contains(err.Error(), in+":2: ") {
		t.Fatalf("got %v, want an error naming line 2", err)
	}
	res, err := Run(context.Background(), Options{Inputs: []string{in}, OutputPrefix: filepath.Join(dir, "x"), Tokenizer: tok, Workers: 1, SkipBadLines: true, AppendEOD: true})
	if err != nil || res.BadLines != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if got, want := docsOf(t, filepath.Join(dir, "x_text_document")), [][][]int32{{{1, 2, 3, 9}}}; !equalDocs(got, want) {
		t.Errorf("documents %v, want %v", got, want)
	}
}
