package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The fixtures are written by tools/torchref/gpt2_bpe_ref.py, an independent Python
// implementation of GPT-2's encoder and of Hugging Face's tokenizer.json rules.

type fixtureCase struct {
	Text   string   `json:"text"`
	Pieces []string `json:"pieces"`
	IDs    []int32  `json:"ids"`
}

type fixture struct {
	VocabSize int           `json:"vocab_size"`
	EOD       int32         `json:"eod"`
	Cases     []fixtureCase `json:"cases"`
}

func readFixture(t testing.TB, name string) fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return f
}

func mustNew(t testing.TB, o Options) Tokenizer {
	t.Helper()
	tok, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// checkFixture encodes every case's text with tok and compares the ids, and checks that
// they decode back to the text.
func checkFixture(t *testing.T, tok Tokenizer, f fixture, roundTrip bool) {
	t.Helper()
	if f.VocabSize != 0 && tok.VocabSize() != f.VocabSize {
		t.Errorf("VocabSize() = %d, want %d", tok.VocabSize(), f.VocabSize)
	}
	if f.VocabSize != 0 && tok.EOD() != f.EOD {
		t.Errorf("EOD() = %d, want %d", tok.EOD(), f.EOD)
	}
	for _, c := range f.Cases {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			t.Errorf("Encode(%.60q):\n got %v\nwant %v", c.Text, got, c.IDs)
			continue
		}
		if roundTrip {
			if back := tok.Decode(got); back != c.Text {
				t.Errorf("Decode(Encode(%.60q)) = %.60q", c.Text, back)
			}
		}
	}
}

func TestGPT2Fixture(t *testing.T) {
	checkFixture(t, mustNew(t, Options{Type: TypeGPT2BPE}), readFixture(t, "gpt2_ids.json"), true)
}

func TestPiecesFixture(t *testing.T) {
	for _, c := range readFixture(t, "gpt2_ids.json").Cases {
		if got := pieces(c.Text); !slices.Equal(got, c.Pieces) {
			t.Errorf("pieces(%.60q):\n got %q\nwant %q", c.Text, got, c.Pieces)
		}
	}
}

// TestGPT2Published checks ids published for GPT-2 (OpenAI's encoder.json, Hugging Face's
// gpt2 tokenizer).
func TestGPT2Published(t *testing.T) {
	tok := mustNew(t, Options{Type: TypeGPT2BPE})
	if tok.VocabSize() != 50257 || tok.EOD() != 50256 || tok.Name() != "GPT2BPETokenizer" {
		t.Fatalf("VocabSize %d EOD %d Name %q, want 50257 50256 GPT2BPETokenizer", tok.VocabSize(), tok.EOD(), tok.Name())
	}
	for text, want := range map[string][]int32{
		"Hello world":   {15496, 995},
		" the":          {262},
		"<|endoftext|>": {50256},
		"\n\n":          {628},
		"!":             {0},
		" ":             {220},
	} {
		if got := tok.Encode(text); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestGPT2FilesMatchBuiltin writes GPT-2's files with WriteGPT2Files, checks their format
// against the ids of the built-in ranks, and loads them with --vocab-file/--merge-file:
// the ids must be the fixture's.
func TestGPT2FilesMatchBuiltin(t *testing.T) {
	dir := t.TempDir()
	if err := WriteGPT2Files(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "vocab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vocab map[string]int32
	if err := json.Unmarshal(data, &vocab); err != nil {
		t.Fatal(err)
	}
	if len(vocab) != 50257 || vocab["<|endoftext|>"] != 50256 || vocab["Ġthe"] != 262 || vocab["!"] != 0 || vocab["Ċ"] != 198 {
		t.Errorf("vocab.json: %d tokens, <|endoftext|> %d, Ġthe %d, ! %d, Ċ %d; want 50257, 50256, 262, 0, 198",
			len(vocab), vocab["<|endoftext|>"], vocab["Ġthe"], vocab["!"], vocab["Ċ"])
	}
	merges, err := os.ReadFile(filepath.Join(dir, "merges.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := splitLines(string(merges))
	// GPT-2's merges.txt: a version line, then 50000 merges, the first ones "Ġ t", "Ġ a", "h e".
	if len(lines) != 50001 || lines[0] != "#version: 0.2" || lines[1] != "Ġ t" || lines[2] != "Ġ a" || lines[3] != "h e" {
		t.Errorf("merges.txt: %d lines starting %q, want 50001 starting #version: 0.2, Ġ t, Ġ a, h e", len(lines), lines[:min(4, len(lines))])
	}
	tok := mustNew(t, Options{Type: TypeGPT2BPE, VocabFile: filepath.Join(dir, "vocab.json"), MergeFile: filepath.Join(dir, "merges.txt")})
	checkFixture(t, tok, readFixture(t, "gpt2_ids.json"), true)
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		s = s[min(i+1, len(s)):]
	}
	return out
}

// TestTinyGPT2Files: GPT-2 cut to its first 300 merges, from files in GPT-2's formats.
func TestTinyGPT2Files(t *testing.T) {
	tok := mustNew(t, Options{Type: TypeGPT2BPE, VocabFile: "testdata/tiny_gpt2/vocab.json", MergeFile: "testdata/tiny_gpt2/merges.txt"})
	checkFixture(t, tok, readFixture(t, "tiny_gpt2_ids.json"), true)
}

// TestHuggingFaceTiny: the hand-written tiny_tokenizer.json (unknown characters, fused unk,
// add_prefix_space, added tokens with lstrip and single_word, a post-processor template).
func TestHuggingFaceTiny(t *testing.T) {
	tok := mustNew(t, Options{Type: TypeHuggingFace, TokenizerModel: "testdata/tiny_tokenizer.json"})
	if tok.VocabSize() != 34 || tok.EOD() != 2 || tok.Name() != "HuggingFaceTokenizer" {
		t.Errorf("VocabSize %d EOD %d Name %q, want 34 (ids 0..33), 2 (</s>), HuggingFaceTokenizer", tok.VocabSize(), tok.EOD(), tok.Name())
	}
	checkFixture(t, tok, readFixture(t, "tiny_ids.json"), false)
	// By hand: " bab" is Ġ b a b; "a b" (rank 13) comes before "b a" (rank 15), so
	// Ġ b ab, and nothing merges Ġ b or b ab. The template puts <s> (1) and </s> (2) around.
	if got, want := tok.Encode("bab"), []int32{1, 3, 5, 28, 2}; !slices.Equal(got, want) {
		t.Errorf("Encode(bab) = %v, want %v", got, want)
	}
	// Decoding spells the tokens' bytes: Ġ is a space.
	if got := tok.Decode([]int32{1, 3, 18, 23, 2}); got != "<s> hello world</s>" {
		t.Errorf("Decode = %q, want %q", got, "<s> hello world</s>")
	}
}

// TestHuggingFaceFromGPT2Files converts GPT-2's files into a tokenizer.json (merges in the
// array form) in a directory: HuggingFaceTokenizer must then be GPT2BPETokenizer.
func TestHuggingFaceFromGPT2Files(t *testing.T) {
	dir := t.TempDir()
	if err := WriteGPT2Files(dir); err != nil {
		t.Fatal(err)
	}
	vocab, err := os.ReadFile(filepath.Join(dir, "vocab.json"))
	if err != nil {
		t.Fatal(err)
	}
	merges, err := os.ReadFile(filepath.Join(dir, "merges.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var pairs [][2]string
	for _, l := range splitLines(string(merges))[1:] {
		a, b, _ := cutMerge(l)
		pairs = append(pairs, [2]string{a, b})
	}
	mj, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"version": "1.0", "truncation": null, "padding": null,
"added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}],
"normalizer": null,
"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
"post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
"decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
"model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "",
"fuse_unk": false, "byte_fallback": false, "vocab": ` + string(vocab) + `, "merges": ` + string(mj) + `}}`
	hfDir := filepath.Join(dir, "gpt2")
	if err := os.Mkdir(hfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hfDir, "tokenizer.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := mustNew(t, Options{Type: TypeHuggingFace, TokenizerModel: hfDir})
	checkFixture(t, tok, readFixture(t, "gpt2_ids.json"), true)

	// An eos_token in tokenizer_config.json next to it decides the end of document.
	cfg := `{"model_max_length": 1024, "eos_token": {"__type": "AddedToken", "content": "Ġthe", "lstrip": false}}`
	if err := os.WriteFile(filepath.Join(hfDir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok := mustNew(t, Options{Type: TypeHuggingFace, TokenizerModel: filepath.Join(hfDir, "tokenizer.json")}); tok.EOD() != 262 {
		t.Errorf("with eos_token Ġthe in tokenizer_config.json: EOD() = %d, want 262", tok.EOD())
	}
}
