package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkErr fails unless err is one line starting with a flag name and containing each of
// want.
func checkErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "--") {
		t.Errorf("error %q is not one line starting with a flag", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTypeErrors(t *testing.T) {
	_, err := New(Options{})
	checkErr(t, err, "--tokenizer-type", "GPT2BPETokenizer")
	_, err = New(Options{Type: "SentencePieceTokenizer"})
	checkErr(t, err, "--tokenizer-type", "SentencePieceTokenizer", "HuggingFaceTokenizer, NullTokenizer")
	_, err = New(Options{Type: TypeHuggingFace})
	checkErr(t, err, "--tokenizer-model")
	if !slices4(Types(), "GPT2BPETokenizer", "HuggingFaceTokenizer", "NullTokenizer", "ByteLevelTokenizer") {
		t.Errorf("Types() = %q", Types())
	}
}

func slices4(got []string, want ...string) bool {
	return strings.Join(got, ",") == strings.Join(want, ",")
}

// tinyVocab is testdata/tiny_gpt2/vocab.json.
func tinyVocab(t *testing.T) string {
	data, err := os.ReadFile("testdata/tiny_gpt2/vocab.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestGPT2FileErrors(t *testing.T) {
	dir := t.TempDir()
	vocab := writeFile(t, dir, "vocab.json", tinyVocab(t))
	merges := writeFile(t, dir, "merges.txt", "#version: 0.2\nĠ t\nh e\n")
	gpt2 := func(v, m string) error {
		_, err := New(Options{Type: TypeGPT2BPE, VocabFile: v, MergeFile: m})
		return err
	}
	if err := gpt2(vocab, merges); err != nil {
		t.Fatalf("valid files: %v", err)
	}
	checkErr(t, gpt2(vocab, ""), "--merge-file")
	checkErr(t, gpt2("", merges), "--vocab-file")
	checkErr(t, gpt2(filepath.Join(dir, "none.json"), merges), "--vocab-file", "none.json")
	checkErr(t, gpt2(vocab, filepath.Join(dir, "none.txt")), "--merge-file", "none.txt")

	for name, c := range map[string]struct{ vocab, want string }{
		"syntax":    {`{"a": 0, "b": }`, "offset 14"},
		"truncated": {`{"a": 0, "b": 1`, "offset"},
		"empty":     {``, "empty"},
		"array":     {`[1, 2]`, "JSON object"},
		"string id": {`{"a": 0, "b": "1"}`, `offset 14: token "b"`},
		"float id":  {`{"a": 0, "b": 1.5}`, "1.5"},
		"negative":  {`{"a": -1}`, "-1"},
		"huge":      {`{"a": 99999999999}`, "99999999999"},
		"dup token": {`{"a": 0, "a": 1}`, `"a" appears twice`},
		"dup id":    {`{"a": 0, "b": 0}`, "same id 0"},
		"trailing":  {`{"a": 0} {}`, "after the JSON object"},
		"no eod":    {strings.Replace(tinyVocab(t), `"<|endoftext|>": 556`, `"xq_unused": 556`, 1), "<|endoftext|>"},
		"no byte":   {strings.Replace(tinyVocab(t), `"!": 0`, `"xq_unused": 0`, 1), "0x21"},
	} {
		v := writeFile(t, dir, "bad.json", c.vocab)
		err := gpt2(v, merges)
		t.Run(name, func(t *testing.T) { checkErr(t, err, "--vocab-file", "bad.json", c.want) })
	}
	for name, c := range map[string]struct{ merges, want string }{
		"one part":   {"#version: 0.2\nĠ t\nhe\n", "line 3"},
		"three":      {"Ġ t\r\nh e x\r\n", "line 2"},
		"two spaces": {"h  e\n", "line 1"},
		"unknown":    {"Ġ t\n\nh zz\n", `line 3: merge "h zz": "zz" is not in the vocabulary`},
		"no result":  {"Ġ t\nz q\n", `line 2: merge "z q": its result "zq" is not in`},
	} {
		m := writeFile(t, dir, "bad.txt", c.merges)
		err := gpt2(vocab, m)
		t.Run(name, func(t *testing.T) { checkErr(t, err, "--merge-file", "bad.txt", c.want) })
	}
}

func tinyHF(t *testing.T) string {
	data, err := os.ReadFile("testdata/tiny_tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestHuggingFaceErrors(t *testing.T) {
	dir := t.TempDir()
	hf := func(content string) error {
		p := writeFile(t, dir, "tokenizer.json", content)
		_, err := New(Options{Type: TypeHuggingFace, TokenizerModel: p})
		return err
	}
	tiny := tinyHF(t)
	if err := hf(tiny); err != nil {
		t.Fatalf("valid file: %v", err)
	}
	_, err := New(Options{Type: TypeHuggingFace, TokenizerModel: "gpt2"})
	checkErr(t, err, "--tokenizer-model", "gpt2", "local tokenizer.json")
	_, err = New(Options{Type: TypeHuggingFace, TokenizerModel: t.TempDir()})
	checkErr(t, err, "--tokenizer-model", "tokenizer.json")

	replace := func(old, new string) string {
		if !strings.Contains(tiny, old) {
			t.Fatalf("tiny_tokenizer.json has no %q", old)
		}
		return strings.Replace(tiny, old, new, 1)
	}
	for name, c := range map[string]struct{ doc, want string }{
		"syntax":        {tiny[:200], "offset"},
		"wordpiece":     {replace(`"type": "BPE"`, `"type": "WordPiece"`), `model.type "WordPiece" is not supported; gotron reads byte-level BPE`},
		"unigram":       {replace(`"type": "BPE"`, `"type": "Unigram"`), `model.type "Unigram"`},
		"metaspace":     {replace(`"pre_tokenizer": {"type": "ByteLevel"`, `"pre_tokenizer": {"type": "Metaspace"`), `pre_tokenizer.type "Metaspace"`},
		"no pre":        {replace(`"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`, `"pre_tokenizer": null`), "pre_tokenizer is null"},
		"nfc":           {replace(`"normalizer": null`, `"normalizer": {"type": "NFC"}`), `normalizer.type "NFC"`},
		"decoder":       {replace(`"decoder": {"type": "ByteLevel"`, `"decoder": {"type": "WordPiece"`), `decoder.type "WordPiece"`},
		"dropout":       {replace(`"dropout": null`, `"dropout": 0.1`), "model.dropout 0.1"},
		"byte fallback": {replace(`"byte_fallback": false`, `"byte_fallback": true`), "model.byte_fallback"},
		"prefix":        {replace(`"continuing_subword_prefix": null`, `"continuing_subword_prefix": "##"`), "continuing_subword_prefix"},
		"unk":           {replace(`"unk_token": "<unk>"`, `"unk_token": "<nope>"`), `unk_token "<nope>"`},
		"merge form":    {replace(`["l", "l"]`, `["l", "l", "l"]`), "model.merges[1]"},
		"merge string":  {replace(`"h e"`, `"h  e"`), `model.merges[0]: "h  e" is not a merge`},
		"merge unknown": {replace(`"o r"`, `"o q"`), `model.merges[5]: merge "o q": "q" is not in model.vocab`},
		"vocab value":   {replace(`"b": 5`, `"b": "5"`), `model.vocab: offset`},
		"vocab type":    {replace(`"merges": [`, `"merges": {"x": 1}, "y": [`), "offset"},
		"added id":      {replace(`{"id": 31, `, `{`), "added_tokens[3]"},
		"post type":     {replace(`"type": "TemplateProcessing"`, `"type": "Frobnicate"`), `post_processor.processors[1]: type "Frobnicate"`},
		"post special":  {replace(`{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence"`, `{"SpecialToken": {"id": "<x>", "type_id": 0}}, {"Sequence"`), `special token "<x>"`},
		"post id":       {replace(`"ids": [1]`, `"ids": [77]`), "adds the id 77"},
		"no eos":        {replace(`"</s>": 2,`, `"<x>": 2,`), ""},
	} {
		doc := c.doc
		if name == "no eos" {
			doc = strings.Replace(strings.Replace(doc, `"content": "</s>"`, `"content": "<y>"`, 1), `"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}`, `"</s>": {"id": "</s>", "ids": [2], "tokens": ["<y>"]}`, 1)
			c.want = "no end-of-document token"
		}
		err := hf(doc)
		t.Run(name, func(t *testing.T) { checkErr(t, err, "--tokenizer-model", "tokenizer.json", c.want) })
	}

	writeFile(t, dir, "tokenizer.json", tiny)
	for name, c := range map[string]struct{ cfg, want string }{
		"syntax":    {`{"eos_token": `, "tokenizer_config.json: offset"},
		"not token": {`{"eos_token": "<nope>"}`, `eos_token "<nope>" is not a token`},
		"number":    {`{"eos_token": 5}`, "eos_token is 5"},
	} {
		writeFile(t, dir, "tokenizer_config.json", c.cfg)
		_, err := New(Options{Type: TypeHuggingFace, TokenizerModel: dir})
		t.Run("config "+name, func(t *testing.T) { checkErr(t, err, "--tokenizer-model", c.want) })
	}
	writeFile(t, dir, "tokenizer_config.json", `{"eos_token": null}`)
	writeFile(t, dir, "special_tokens_map.json", `{"eos_token": {"content": "<s>", "lstrip": false}}`)
	if tok, err := New(Options{Type: TypeHuggingFace, TokenizerModel: dir}); err != nil || tok.EOD() != 1 {
		t.Errorf("eos_token <s> from special_tokens_map.json: %v, %v; want EOD 1", tok, err)
	}
}
