package preprocess

import (
	"strings"
	"testing"
)

// FuzzEncodeChunk: any bytes as a chunk of JSON lines end in documents or one
// error naming the file and line, never a panic; with SkipBadLines every
// non-blank line is a document or a counted bad line.
func FuzzEncodeChunk(f *testing.F) {
	for _, s := range []string{
		`{"text": "a"}` + "\n" + `{"text": ["b", "c"]}`,
		`{"text": "a"`, `[]`, `{"text": 1}`, `{"text": ["a", null]}`, "\n\n", `{"text": "\ud800"}`,
		`{"text": "x", "text": "y"}`, "\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok := byteTok(t)
		for _, skip := range []bool{false, true} {
			o := Options{JSONKeys: []string{"text"}, Tokenizer: tok, AppendEOD: true, SkipBadLines: skip}
			e := o.encode(chunk{file: "f.jsonl", line: 1, json: true, data: b})
			if e.err != nil {
				if skip || !strings.HasPrefix(e.err.Error(), "--input f.jsonl:") || strings.Contains(e.err.Error(), "\n") {
					t.Fatalf("skip=%v: %v", skip, e.err)
				}
				continue
			}
			if len(e.keys[0].nSeqs) != e.docs {
				t.Fatalf("%d documents, %d sequence counts", e.docs, len(e.keys[0].nSeqs))
			}
			sum := 0
			for _, l := range e.keys[0].seqLens {
				sum += l
			}
			if sum != len(e.keys[0].tokens) {
				t.Fatalf("sequence lengths add to %d, %d tokens", sum, len(e.keys[0].tokens))
			}
		}
	})
}
