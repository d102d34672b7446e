package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzGPT2Encode encodes any text with GPT-2's built-in vocabulary: no panic, the ids are
// in the vocabulary, the pieces cover the text, and decoding gives the text back (with
// each invalid UTF-8 run as U+FFFD).
func FuzzGPT2Encode(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	f.Add(strings.Repeat("a", 3000))
	f.Add(strings.Repeat("'s", 100))
	tok := mustNew(f, Options{Type: TypeGPT2BPE})
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%q): id %d outside [0, %d)", s, id, tok.VocabSize())
			}
		}
		if got := strings.Join(pieces(s), ""); got != s {
			t.Fatalf("pieces(%q) join to %q", s, got)
		}
		want := s
		if !utf8.ValidString(s) {
			want = strings.ToValidUTF8(s, "\uFFFD")
		}
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

// FuzzReadVocab parses any vocab.json: no panic, and what it accepts encoding/json reads
// as the same map.
func FuzzReadVocab(f *testing.F) {
	for _, s := range []string{`{"a": 0, "b": 1}`, `{}`, `{"a": 0, "a": 1}`, `{"a": 1e3}`, `[]`, `{"\u0120t": 5}`, `{"a": 0} x`, `{"a":0,}`} {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile("testdata/tiny_gpt2/vocab.json"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vocab, err := parseVocab("vocab.json", data, 0)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error %q is not one line", msg)
			}
			return
		}
		var ref map[string]int32
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		if len(ref) != len(vocab) {
			t.Fatalf("%q: %d tokens, encoding/json %d", data, len(vocab), len(ref))
		}
		for k, v := range ref {
			if vocab[k] != v {
				t.Fatalf("%q: token %q id %d, encoding/json %d", data, k, vocab[k], v)
			}
		}
	})
}

// FuzzReadMerges parses any merges.txt against the tiny GPT-2 vocabulary: no panic, one
// rule per merge line.
func FuzzReadMerges(f *testing.F) {
	data, err := os.ReadFile("testdata/tiny_gpt2/vocab.json")
	if err != nil {
		f.Fatal(err)
	}
	vocab, err := parseVocab("vocab.json", data, 0)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"#version: 0.2\nĠ t\nh e\n", "Ġ t\r\n", "a", "h  e", "\n\n", "#version\nx y z"} {
		f.Add([]byte(s))
	}
	if m, err := os.ReadFile("testdata/tiny_gpt2/merges.txt"); err == nil {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := parseMerges("merges.txt", data, vocab, "vocab.json")
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error %q is not one line", msg)
			}
			return
		}
		if n := strings.Count(string(data), "\n") + 1; len(rules) > n {
			t.Fatalf("%d rules from %d lines", len(rules), n)
		}
	})
}

// FuzzReadTokenizerJSON parses any tokenizer.json: no panic; one it accepts encodes and
// decodes text without panic, with ids in its vocabulary.
func FuzzReadTokenizerJSON(f *testing.F) {
	tiny, err := os.ReadFile("testdata/tiny_tokenizer.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tiny)
	for _, s := range []string{`{}`, `{"model": null}`, `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := parseHF("tokenizer.json", data)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error %q is not one line", msg)
			}
			return
		}
		tok := spec.build()
		for _, s := range []string{"hello world", "<s>ab <mask> wor\n", "\xff é"} {
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q): id %d outside [0, %d)", s, id, tok.VocabSize())
				}
			}
			if out := tok.Decode(ids); !utf8.ValidString(out) {
				t.Fatalf("Decode gave invalid UTF-8 %q", out)
			}
		}
	})
}

// FuzzReadTokenizerConfig parses any tokenizer_config.json: no panic.
func FuzzReadTokenizerConfig(f *testing.F) {
	for _, s := range []string{`{"eos_token": "</s>"}`, `{"eos_token": {"content": "<|endoftext|>"}}`, `{"eos_token": null}`, `{"eos_token": 3}`, `{`, `[]`,
		"{\"eos_token\":{\n}}"} { // (an object spread over lines: its error quoted it with the newline)
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		eos, ok, err := parseEOSConfig("tokenizer_config.json", data)
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("error %q is not one line", err)
		}
		if ok && eos == "" {
			t.Fatal("an empty eos_token found")
		}
	})
}

// FuzzReadRanks parses any tiktoken ranks file and derives its merges: no panic.
func FuzzReadRanks(f *testing.F) {
	b64 := base64.StdEncoding.EncodeToString
	var b strings.Builder
	for i := range 256 {
		b.WriteString(b64([]byte{byte(i)}) + " " + strconv.Itoa(i) + "\n")
	}
	bytes := b.String()
	f.Add([]byte(bytes))
	f.Add([]byte(bytes + b64([]byte("ab")) + " 256\n" + b64([]byte("abc")) + " 257\n"))
	f.Add([]byte(bytes + b64([]byte("abc")) + " 256\n"))
	f.Add([]byte("IQ== 0\nIg== 2\n"))
	f.Add([]byte("!!! 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := parseRanks("ranks", data)
		if err != nil {
			return
		}
		rules, err := ranksToMerges(toks)
		if err != nil {
			return
		}
		for _, r := range rules {
			if toks[r.a]+toks[r.b] != toks[r.id] || r.a >= r.id || r.b >= r.id {
				t.Fatalf("merge %q + %q -> %q (ranks %d %d %d)", toks[r.a], toks[r.b], toks[r.id], r.a, r.b, r.id)
			}
		}
	})
}
