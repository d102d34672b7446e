package tokenizer_test

import (
	"slices"
	"testing"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/tokenizer"
)

// TestByteLevelIsDataByteTokenizer: ByteLevelTokenizer has data.ByteTokenizer's ids,
// vocabulary and end of document, so byte-level corpora stay the same.
func TestByteLevelIsDataByteTokenizer(t *testing.T) {
	tok, err := tokenizer.New(tokenizer.Options{Type: "ByteLevelTokenizer"})
	if err != nil {
		t.Fatal(err)
	}
	var ref data.ByteTokenizer
	if tok.VocabSize() != ref.Vocab() || tok.EOD() != data.EndOfDocument {
		t.Fatalf("VocabSize %d EOD %d, want %d and data.EndOfDocument %d", tok.VocabSize(), tok.EOD(), ref.Vocab(), data.EndOfDocument)
	}
	for _, s := range []string{"", "package main\n", "héllo 日本 😀", "\xff\xfe bad \xc3", "\x00"} {
		if got, want := tok.Encode(s), ref.Encode(s); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, data.ByteTokenizer %v", s, got, want)
		}
		ids := append(ref.Encode(s), -1, 256, 65)
		if got, want := tok.Decode(ids), ref.Decode(ids); got != want {
			t.Errorf("Decode(%v) = %q, data.ByteTokenizer %q", ids, got, want)
		}
	}
}
