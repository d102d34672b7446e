package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
)

// TestDataErrors: exactly one source, and the options that belong to one.
func TestDataErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		d    Data
		want string // "" for none
	}{
		{"mock", Data{MockData: true}, ""},
		{"none", Data{}, "give exactly one data source"},
		{"two", Data{MockData: true, TextDataPath: []string{"x"}}, "(got --mock-data and --text-data-path)"},
		{"split without data-path", Data{MockData: true, Split: "9,1,0"}, `--split "9,1,0" without --data-path`},
		{"test split", Data{TrainDataPath: []string{"a"}, TestDataPath: []string{"b"}}, "--test-data-path"},
		{"eod mask on text", Data{TextDataPath: []string{"x"}, EODMaskLoss: true}, "--eod-mask-loss needs indexed data"},
	} {
		errs := c.d.DataErrors(false)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %q, want no error", c.name, errs)
		case c.want != "" && (len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), c.want)):
			t.Errorf("%s: %q, want one mentioning %q", c.name, errs, c.want)
		}
	}
	if errs := (Data{ValidDataPath: []string{"v"}}).DataErrors(true); len(errs) != 0 {
		t.Errorf("--valid-data-path alone under --skip-train: %q, want no error", errs)
	}
	if errs := strings.Join((Data{}).DataErrors(false), "\n"); strings.Contains(errs, "--tokenizer-type with") {
		t.Errorf("no source: %q also blames a tokenizer", errs)
	}
	if errs := strings.Join((Data{TextDataPath: []string{"x"}, Tokenizer: tokenizer.Options{Type: "GPT2BPETokenizer"}}).DataErrors(false), "\n"); !strings.Contains(errs, "--tokenizer-type with --text-data-path:") {
		t.Errorf("a tokenizer with text: %q, want it named with --text-data-path", errs)
	}
	// The errors name the flags given, not their kin.
	errs := strings.Join((Data{MockData: true, TestDataPath: []string{"t"}}).DataErrors(false), "\n")
	if !strings.Contains(errs, "(got --mock-data and --test-data-path)") || strings.Contains(errs, "--valid-data-path") {
		t.Errorf("--mock-data with --test-data-path: %q, want the two flags named and no --valid-data-path", errs)
	}
}

// TestOpenMock: mock data draws the training and validation streams from
// two seeds over the model's vocabulary.
func TestOpenMock(t *testing.T) {
	s, err := Open(Data{MockData: true}, Need{SeqLength: 8, Vocab: 32, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := s.Train.(data.MockDataset)
	va, ok2 := s.Valid.(data.MockDataset)
	if !ok || !ok2 || tr.Seed != 5 || va.Seed == tr.Seed || tr.Vocab != 32 || tr.Seq != 8 || s.Vocab != 32 {
		t.Errorf("mock data: %+v", s)
	}
	if s.Text() == nil {
		t.Error("no tokenizer for samples of mock data")
	}
}

// writeDocs writes an indexed dataset of n documents of 20 tokens below
// 60, each ended by 63, and returns its prefix.
func writeDocs(t *testing.T, dir string, n int) string {
	t.Helper()
	prefix := filepath.Join(dir, "docs_text_document")
	w, err := indexed.Create(prefix, indexed.Uint16)
	if err != nil {
		t.Fatal(err)
	}
	for d := range n {
		doc := make([]int32, 21)
		for i := range 20 {
			doc[i] = int32((d*7 + i) % 60)
		}
		doc[20] = 63
		if err := w.AddDocument(doc, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return prefix
}

// TestOpenIndexed: --data-path builds GPTDatasets of the samples asked
// (the valid split only when the run evaluates), and the errors of a
// wrong prefix say what the user likely meant.
func TestOpenIndexed(t *testing.T) {
	dir := t.TempDir()
	prefix := writeDocs(t, dir, 40)
	d := Data{DataPath: []string{prefix}, Split: "80,20,0", DataCachePath: filepath.Join(dir, "cache")}
	n := Need{SeqLength: 16, Vocab: 64, Seed: 1, Samples: [3]int{10, 4, 0}, Evaluates: true}
	s, err := Open(d, n)
	if err != nil {
		t.Fatal(err)
	}
	if s.Train == nil || s.Valid == nil || !strings.Contains(s.Desc, "--data-path "+prefix+" split 80,20,0") {
		t.Errorf("sets %+v", s)
	}
	n.Evaluates = false
	if s, err := Open(d, n); err != nil || s.Valid != nil {
		t.Errorf("a run that does not evaluate: valid %v (%v), want none", s.Valid, err)
	}
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "docs"), "pass the dataset gotron preprocess wrote for --output-prefix"},
		{dir, "a directory, not a dataset prefix"},
		{filepath.Join(dir, "missing"), "--data-path"},
	} {
		_, err := Open(Data{DataPath: []string{c.path}}, n)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--data-path %s: %v, want it to say %q", c.path, err, c.want)
		}
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Data{DataPath: []string{text}}, n); err == nil || !strings.Contains(err.Error(), "gotron preprocess --input "+text) {
		t.Errorf("a text file as --data-path: %v, want the preprocess command", err)
	}
}
