//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
)

// The end-to-end tests of the indexed-data path through the command line:
// gotron inspect samples against the numpy reference's samples, gotron
// preprocess read back with package indexed, and gotron train's error for a
// text file given as --data-path. Every command runs in a child process
// (runMain), so stdout, stderr and the exit status are the real ones.

// gptdataTestdata is the directory of data/gptdata's fixtures, written by
// tools/torchref/gpt_dataset_ref.py (an independent numpy implementation).
const gptdataTestdata = "../../data/gptdata/testdata"

// refCorpus is corpus.json: the token corpora of the fixture cases, each a
// list of sequence lengths and their tokens back to back.
type refCorpus struct {
	SeqLength int `json:"seq_length"`
	EOD       int32
	Corpora   map[string]struct{ Lengths, Tokens []int32 }
}

// refCase is the part of one cases.json case these tests read.
type refCase struct {
	Name     string
	DataPath []string `json:"data_path"`
	Split    *string
	Seed     uint64
	Pad      int32
	Run      *struct {
		TrainIters      int `json:"train_iters"`
		GlobalBatchSize int `json:"global_batch_size"`
	}
	ResetPositionIDs   bool `json:"reset_position_ids"`
	ResetAttentionMask bool `json:"reset_attention_mask"`
	EODMaskLoss        bool `json:"eod_mask_loss"`
	Splits             []*struct{ Tokens [][]int32 }
}

func readFixture(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gptdataTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// writeCorpus writes a corpus as the indexed dataset prefix with
// indexed.Writer: one document of one sequence per length, empty ones too
// (the reference's GPTDataset reads the sequences as its documents, and the
// fixture corpus has empty ones).
func writeCorpus(t *testing.T, prefix string, lengths, tokens []int32) {
	t.Helper()
	w, err := indexed.Create(prefix, indexed.Uint16)
	if err != nil {
		t.Fatal(err)
	}
	rest := tokens
	for _, n := range lengths {
		if err := w.AddDocument(rest[:n], []int{int(n)}); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		t.Fatalf("corpus: %d tokens beyond the lengths", len(rest))
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	ds, err := indexed.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.NumSequences() != len(lengths) || ds.NumTokens() != int64(len(tokens)) {
		t.Fatalf("%s: %d sequences of %d tokens, the corpus has %d of %d", prefix, ds.NumSequences(), ds.NumTokens(), len(lengths), len(tokens))
	}
}

// TestInspectSamplesMatchesReference: `gotron inspect samples --json` on the
// fixture corpus, written as an indexed dataset, prints exactly
// {"samples":[[...],...]} and a newline holding the numpy reference's first
// 100 training samples of the single-prefix case (seed 1234, split
// 969,30,1, the run's 25 iterations of 16 samples) — the whole path from
// the .bin/.idx files through the flags, the index building and the sample
// order. Without the run's length (--count only) the first samples are the
// same: they come from the first epoch either way.
func TestInspectSamplesMatchesReference(t *testing.T) {
	var corpus refCorpus
	readFixture(t, "corpus.json", &corpus)
	var cases []refCase
	readFixture(t, "cases.json", &cases)
	var c *refCase
	for i := range cases {
		if cases[i].Name == "single" {
			c = &cases[i]
		}
	}
	if c == nil || len(c.DataPath) != 1 || c.Split == nil || *c.Split != "969,30,1" || c.Run == nil || c.Pad != -1 ||
		c.ResetPositionIDs || c.ResetAttentionMask || c.EODMaskLoss || len(c.Splits) == 0 || len(c.Splits[0].Tokens) != 100 {
		t.Fatalf("cases.json has no single-prefix 969,30,1 case with a run and 100 training samples: %+v", c)
	}
	src, ok := corpus.Corpora[c.DataPath[0]]
	if !ok {
		t.Fatalf("corpus.json has no corpus %s", c.DataPath[0])
	}
	prefix := filepath.Join(t.TempDir(), c.DataPath[0])
	writeCorpus(t, prefix, src.Lengths, src.Tokens)

	var want strings.Builder
	want.WriteString(`{"samples":[`)
	for i, s := range c.Splits[0].Tokens {
		if len(s) != corpus.SeqLength+1 {
			t.Fatalf("reference sample %d has %d tokens, want seq_length+1 = %d", i, len(s), corpus.SeqLength+1)
		}
		if i > 0 {
			want.WriteByte(',')
		}
		want.WriteByte('[')
		for j, id := range s {
			if j > 0 {
				want.WriteByte(',')
			}
			want.WriteString(strconv.Itoa(int(id)))
		}
		want.WriteByte(']')
	}
	want.WriteString("]}\n")

	common := []string{"inspect", "samples", "--json", "--data-path", prefix, "--seq-length", strconv.Itoa(corpus.SeqLength),
		"--seed", strconv.FormatUint(c.Seed, 10), "--split", *c.Split, "--count", "100"}
	for _, extra := range [][]string{
		{"--train-iters", strconv.Itoa(c.Run.TrainIters), "--global-batch-size", strconv.Itoa(c.Run.GlobalBatchSize)},
		nil,
	} {
		args := append(slices.Clone(common), extra...)
		stdout, stderr, code := runMain(t, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("gotron %s: status %d, stderr\n%s", strings.Join(args, " "), code, stderr)
		}
		if stdout != want.String() {
			t.Errorf("gotron %s: stdout differs from the reference's samples at byte %d:\n got %.300s\nwant %.300s",
				strings.Join(args, " "), firstDifference(stdout, want.String()), stdout, want.String())
		}
	}
}

// firstDifference returns the index of the first byte where a and b differ.
func firstDifference(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// ppDoc is one document of the preprocess tests: its sequences (a JSON
// string is one, a list of strings one each; a plain-text file is one).
type ppDoc []string

// ppInputs writes the preprocess tests' input directory: a.jsonl (a blank
// line, a document of sentences, an empty document, non-ASCII text, an extra
// key), b.jsonl (over 1 MiB, so that it is read in several chunks, with a
// bad line after the first MiB when bad is set) and c.txt (one plain-text
// document). It returns the documents in input order (without the bad line)
// and the bad line's path:line.
func ppInputs(t *testing.T, dir string, bad bool) ([]ppDoc, string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var docs []ppDoc
	var a bytes.Buffer
	line := func(buf *bytes.Buffer, v any, d ppDoc) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
		docs = append(docs, d)
	}
	line(&a, map[string]string{"text": "Hello world"}, ppDoc{"Hello world"})
	a.WriteString("\n")
	sentences := []string{"First sentence.", " Second one.", ""}
	line(&a, map[string][]string{"text": sentences}, ppDoc(sentences))
	line(&a, map[string]string{"text": ""}, ppDoc{""})
	line(&a, map[string]any{"text": "naïve café — 日本語 😀\n\ttabs and  spaces", "id": 7}, ppDoc{"naïve café — 日本語 😀\n\ttabs and  spaces"})
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), a.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	words := []string{"the", "model", "trains", "on", "tokens", "of", "Go", "code", "and", "text", ",", ".", "über", "naïve", "42", "1990s", "can't", "  ", "\n"}
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	lines, badAt := 0, ""
	for b.Len() < 1<<20+200<<10 {
		var s strings.Builder
		for range 20 + r.IntN(80) {
			if s.Len() > 0 {
				s.WriteByte(' ')
			}
			s.WriteString(words[r.IntN(len(words))])
		}
		line(&b, map[string]string{"text": s.String()}, ppDoc{s.String()})
		lines++
		if bad && badAt == "" && b.Len() > 1<<20+50<<10 {
			b.WriteString(`{"text": "an unterminated string}` + "\n")
			lines++
			badAt = fmt.Sprintf("%s:%d", filepath.Join(dir, "b.jsonl"), lines)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "b.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	txt := "A plain text file.\nIt is one document, newlines and all.\n"
	if err := os.WriteFile(filepath.Join(dir, "c.txt"), []byte(txt), 0o644); err != nil {
		t.Fatal(err)
	}
	docs = append(docs, ppDoc{txt})
	return docs, badAt
}

// expectedDataset tokenizes docs as preprocess must: each sequence
// encoded, empty ones dropped, the end of document appended to the last
// sequence of a document with tokens. It returns each document's
// sequences.
func expectedDataset(tok tokenizer.Tokenizer, docs []ppDoc) [][][]int32 {
	out := make([][][]int32, len(docs))
	for i, d := range docs {
		var seqs [][]int32
		for _, s := range d {
			if ids := tok.Encode(s); len(ids) > 0 {
				seqs = append(seqs, ids)
			}
		}
		if len(seqs) > 0 {
			seqs[len(seqs)-1] = append(seqs[len(seqs)-1], tok.EOD())
		}
		out[i] = seqs
	}
	return out
}

// readDataset reads an indexed dataset back as each document's sequences,
// checking its dtype.
func readDataset(t *testing.T, prefix string, dt indexed.DType) [][][]int32 {
	t.Helper()
	ds, err := indexed.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.DType() != dt {
		t.Errorf("%s: dtype %s, want %s", prefix, ds.DType(), dt)
	}
	docIdx, lengths := ds.DocumentIndices(), ds.SequenceLengths()
	out := make([][][]int32, ds.NumDocuments())
	for d := range out {
		for s := docIdx[d]; s < docIdx[d+1]; s++ {
			out[d] = append(out[d], ds.Tokens(nil, int(s), 0, int(lengths[s])))
		}
	}
	return out
}

// compareDatasets reports the first document where got and want differ.
func compareDatasets(t *testing.T, name string, got, want [][][]int32) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d documents, want %d", name, len(got), len(want))
	}
	for d := range min(len(got), len(want)) {
		if len(got[d]) != len(want[d]) {
			t.Errorf("%s: document %d has %d sequences, want %d", name, d, len(got[d]), len(want[d]))
			return
		}
		for s := range got[d] {
			if !slices.Equal(got[d][s], want[d][s]) {
				t.Errorf("%s: document %d sequence %d:\n got %v\nwant %v", name, d, s, got[d][s], want[d][s])
				return
			}
		}
	}
}

// listDir returns the names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// preprocessArgs are the flags of a GPT-2 preprocess run of in into out.
func preprocessArgs(in, out string, extra ...string) []string {
	return append([]string{"preprocess", "--input", in, "--output-prefix", out, "--tokenizer-type", "GPT2BPETokenizer", "--append-eod"}, extra...)
}

// TestPreprocessRoundTrip: `gotron preprocess --tokenizer-type
// GPT2BPETokenizer --append-eod` on a directory of JSON lines and text
// writes PREFIX_text_document.{bin,idx}, uint16 (GPT-2's 50257 ids), that
// read back with package indexed as the tokenizer's Encode of every
// sequence plus the end-of-document id per document, in input order, with
// the reference's document indices (a list of sentences is one document
// of several sequences; an empty document has none). "Hello world" is
// GPT-2's 15496 995, and its end of document 50256. --workers 1 and 2 give
// byte-identical files.
func TestPreprocessRoundTrip(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in")
	docs, _ := ppInputs(t, in, false)
	tok, err := tokenizer.New(tokenizer.Options{Type: tokenizer.TypeGPT2BPE})
	if err != nil {
		t.Fatal(err)
	}
	want := expectedDataset(tok, docs)
	if first := [][]int32{{15496, 995, 50256}}; !slices.EqualFunc(want[0], first, slices.Equal) {
		t.Fatalf("GPT-2 encodes \"Hello world\" + end of document as %v, want %v", want[0], first)
	}
	var files [2]map[string][]byte
	for i, workers := range []string{"1", "2"} {
		out := filepath.Join(root, "out"+workers, "corpus")
		stdout, stderr, code := runMain(t, preprocessArgs(in, out, "--workers", workers)...)
		if code != 0 {
			t.Fatalf("--workers %s: status %d\n%s%s", workers, code, stdout, stderr)
		}
		prefix := out + "_text_document"
		for _, w := range []string{"preprocessed 3 files, " + strconv.Itoa(len(docs)) + " documents", map[string]string{"1": "(1 worker)", "2": "(2 workers)"}[workers],
			"wrote " + prefix + ".bin and " + prefix + ".idx: train with --data-path " + prefix} {
			if !strings.Contains(stdout, w) {
				t.Errorf("--workers %s: stdout lacks %q:\n%s", workers, w, stdout)
			}
		}
		if strings.Contains(stdout, "skipped") {
			t.Errorf("--workers %s: skipped input:\n%s", workers, stdout)
		}
		if names := listDir(t, filepath.Dir(out)); !slices.Equal(names, []string{"corpus_text_document.bin", "corpus_text_document.idx"}) {
			t.Errorf("--workers %s: output directory holds %v", workers, names)
		}
		compareDatasets(t, "--workers "+workers, readDataset(t, prefix, indexed.Uint16), want)
		files[i] = map[string][]byte{}
		for _, ext := range []string{".bin", ".idx"} {
			if files[i][ext], err = os.ReadFile(prefix + ext); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ext := range []string{".bin", ".idx"} {
		if a, b := files[0][ext], files[1][ext]; !bytes.Equal(a, b) {
			t.Errorf("%s: --workers 1 and --workers 2 differ (%d and %d bytes, first difference at byte %d)", ext, len(a), len(b), firstDifference(string(a), string(b)))
		}
	}
}

// TestPreprocessBadLine: a line that is not JSON, past the first MiB of a
// file (so in a later chunk, with two workers), stops preprocess with one
// error line naming the file and the line and the fix, and leaves nothing
// in the output directory (no dataset, no temporary file). With
// --skip-bad-lines the line is skipped and counted, and the dataset holds
// every other document.
func TestPreprocessBadLine(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in")
	docs, badAt := ppInputs(t, in, true)
	if badAt == "" {
		t.Fatal("no bad line written")
	}
	out := filepath.Join(root, "out", "corpus")
	stdout, stderr, code := runMain(t, preprocessArgs(in, out, "--workers", "2")...)
	msg := strings.TrimSuffix(stderr, "\n")
	if code != 1 || stdout != "" || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "gotron: --input "+badAt+": ") ||
		!strings.Contains(msg, "--skip-bad-lines") {
		t.Errorf("bad line: status %d, stdout %q, stderr\n%s\nwant one line starting gotron: --input %s: and naming --skip-bad-lines", code, stdout, stderr, badAt)
	}
	if names := listDir(t, filepath.Dir(out)); len(names) != 0 {
		t.Errorf("the failed run left %v in the output directory", names)
	}

	stdout, stderr, code = runMain(t, preprocessArgs(in, out, "--workers", "2", "--skip-bad-lines")...)
	if code != 0 {
		t.Fatalf("--skip-bad-lines: status %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "skipped 1 unreadable JSON lines (--skip-bad-lines) and 0 binary files") {
		t.Errorf("--skip-bad-lines: stdout does not report one skipped line:\n%s", stdout)
	}
	tok, err := tokenizer.New(tokenizer.Options{Type: tokenizer.TypeGPT2BPE})
	if err != nil {
		t.Fatal(err)
	}
	compareDatasets(t, "--skip-bad-lines", readDataset(t, out+"_text_document", indexed.Uint16), expectedDataset(tok, docs))
}

// TestPreprocessRefuses: --split-sentences (no sentence splitter) and a
// missing --tokenizer-type are refused with one error line naming the flag,
// and write nothing.
func TestPreprocessRefuses(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"text": "Hello world"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "out", "corpus")
	for _, c := range []struct {
		args []string
		want string
	}{
		{preprocessArgs(in, out, "--split-sentences"), "gotron: --split-sentences: "},
		{[]string{"preprocess", "--input", in, "--output-prefix", out, "--append-eod"}, "gotron: --tokenizer-type is required"},
		{preprocessArgs(in, out, "--vocab-size", "100"), "gotron: --vocab-size sets the NullTokenizer's number of ids"},
		{preprocessArgs(empty, out), "gotron: --input: 1 file(s) and no document in them"},
		{preprocessArgs(in, out, "--partitions", "0"), "gotron: --partitions 0: must be at least 1"},
	} {
		stdout, stderr, code := runMain(t, c.args...)
		msg := strings.TrimSuffix(stderr, "\n")
		if code != 1 || stdout != "" || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, c.want) {
			t.Errorf("gotron %s: status %d, stdout %q, stderr\n%s\nwant one line starting %q", strings.Join(c.args, " "), code, stdout, stderr, c.want)
		}
		if names := listDir(t, filepath.Dir(out)); len(names) != 0 {
			t.Errorf("gotron %s: wrote %v", strings.Join(c.args, " "), names)
		}
	}
}

// TestTrainDataPathTextFile: `gotron train --data-path` naming a text file
// (the old meaning of the flag) fails with one line that says it is not an
// indexed dataset and gives both ways on: gotron preprocess, or
// --text-data-path.
func TestTrainDataPathTextFile(t *testing.T) {
	txt := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(txt, []byte("plain text, not tokenized\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", "--data-path", txt, "--vocab-size", "64", "--num-layers", "1", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "2",
		"--train-iters", "1", "--eval-iters", "0"}
	stdout, stderr, code := runMain(t, args...)
	msg := strings.TrimSuffix(stderr, "\n")
	if code != 1 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "gotron: --data-path "+txt+": ") {
		t.Fatalf("status %d, stdout\n%s\nstderr\n%s\nwant one line starting gotron: --data-path %s:", code, stdout, stderr, txt)
	}
	for _, w := range []string{"not an indexed dataset", "gotron preprocess --input " + txt, "--text-data-path " + txt} {
		if !strings.Contains(msg, w) {
			t.Errorf("the error lacks %q:\n%s", w, msg)
		}
	}
}

// TestPreprocessPartitionFlags: Megatron's --partitions,
// --keep-sequential-samples and --keep-newlines are accepted, each with a
// note, and the dataset is the one written without them, byte for byte.
func TestPreprocessPartitionFlags(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"text": "Hello world\nand more"}`+"\n"+`{"text": "Second"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, flagged := filepath.Join(root, "plain"), filepath.Join(root, "flagged")
	if _, stderr, code := runMain(t, preprocessArgs(in, plain)...); code != 0 {
		t.Fatalf("preprocess: %s", stderr)
	}
	stdout, stderr, code := runMain(t, preprocessArgs(in, flagged, "--partitions", "4", "--keep-sequential-samples", "--keep-newlines")...)
	if code != 0 {
		t.Fatalf("preprocess with the partition flags: %s", stderr)
	}
	for _, w := range []string{"note: --partitions 4", "note: --keep-sequential-samples", "note: --keep-newlines"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("no %q in:\n%s", w, stdout)
		}
	}
	for _, ext := range []string{".bin", ".idx"} {
		a, errA := os.ReadFile(plain + "_text_document" + ext)
		b, errB := os.ReadFile(flagged + "_text_document" + ext)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs with the partition flags (%v, %v)", ext, errA, errB)
		}
	}
}
