package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// roundTripTexts are varied texts; the last ones are not valid UTF-8.
var roundTripTexts = []string{
	"", "a", " ", "\n", "Hello, world!", "  two  spaces  ", "\t\ttabs\tand\nnewlines\r\n\r\n",
	"I'm you're they've we'll he'd it's don't I'M 'S", "Café naïve résumé façade ÀÉÎÕÜ ß",
	"日本語のテキストと中文文本", "한국어", "Emoji 😀👍🏽 👨‍👩‍👧‍👦 🇫🇷", "12345 3.14 ２０２４ ½ Ⅻ",
	"x=1;y=2;z=x+y**2", "func main() {\n\tfmt.Println(\"hi\")\n}\n", "\u00a0\u3000\u2028\u0085\u200b\ufeff",
	"\x00\x01\x7f", "<|endoftext|>", "a<|endoftext|>b<|endoftext", strings.Repeat("ab ", 100),
	strings.Repeat("z", 500), strings.Repeat("-=", 300),
	"\xff", "ab\xc3", "\xe2\x82 mid \xf0\x9f\x98", "valid é then \xc3\x28 invalid", "\xed\xa0\x80 surrogate",
}

// tokenizers returns one of each kind that round-trips text.
func roundTripTokenizers(t *testing.T) []Tokenizer {
	return []Tokenizer{
		mustNew(t, Options{Type: TypeGPT2BPE}),
		mustNew(t, Options{Type: TypeGPT2BPE, VocabFile: "testdata/tiny_gpt2/vocab.json", MergeFile: "testdata/tiny_gpt2/merges.txt"}),
		mustNew(t, Options{Type: TypeByteLevel}),
	}
}

// TestRoundTrip: Decode(Encode(s)) is s for valid UTF-8, and s with each invalid run
// replaced by U+FFFD otherwise; the ids are in the vocabulary.
func TestRoundTrip(t *testing.T) {
	for _, tok := range roundTripTokenizers(t) {
		for _, s := range roundTripTexts {
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("%s: Encode(%q) has id %d outside [0, %d)", tok.Name(), s, id, tok.VocabSize())
				}
			}
			want := strings.ToValidUTF8(s, "\uFFFD")
			if got := tok.Decode(ids); got != want {
				t.Errorf("%s: Decode(Encode(%.40q)) = %.40q, want %.40q", tok.Name(), s, got, want)
			}
		}
	}
}

// TestDecodeAlwaysValid decodes random ids, many outside the vocabulary.
func TestDecodeAlwaysValid(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	toks := append(roundTripTokenizers(t), mustNew(t, Options{Type: TypeNull, VocabSize: 10}),
		mustNew(t, Options{Type: TypeHuggingFace, TokenizerModel: "testdata/tiny_tokenizer.json"}))
	for _, tok := range toks {
		for range 200 {
			ids := make([]int32, r.IntN(20))
			for i := range ids {
				ids[i] = int32(r.IntN(tok.VocabSize()+20)) - 10
			}
			if s := tok.Decode(ids); !utf8.ValidString(s) {
				t.Fatalf("%s: Decode(%v) = %q is not valid UTF-8", tok.Name(), ids, s)
			}
		}
		if got := tok.Decode([]int32{-1}); tok.Name() != TypeNull && got != "\uFFFD" {
			t.Errorf("%s: Decode([-1]) = %q, want U+FFFD", tok.Name(), got)
		}
	}
}

// TestLongWords: the heap merge of long words equals the scan merge.
func TestLongWords(t *testing.T) {
	tok, err := newGPT2("", "")
	if err != nil {
		t.Fatal(err)
	}
	m := tok.model
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "e", "th", "in", "er", "é", "日", " ", "-", "=", "1"}
	for n := range 400 {
		var b strings.Builder
		for range 1 + n%150 {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		w := b.String()
		scan := m.mergeScan(m.initial(nil, w))
		heap := m.mergeHeap(m.initial(nil, w))
		if !slices.Equal(scan, heap) {
			t.Fatalf("word %q: scan %v, heap %v", w, scan, heap)
		}
	}
}

// TestConcurrentEncode encodes the fixture texts from several goroutines with one fresh
// tokenizer (an empty cache filled concurrently).
func TestConcurrentEncode(t *testing.T) {
	f := readFixture(t, "gpt2_ids.json")
	tok := mustNew(t, Options{Type: TypeGPT2BPE, VocabFile: "testdata/tiny_gpt2/vocab.json", MergeFile: "testdata/tiny_gpt2/merges.txt"})
	want := readFixture(t, "tiny_gpt2_ids.json")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 20 {
				i := (g*7 + k) % len(f.Cases)
				if got := tok.Encode(want.Cases[i].Text); !slices.Equal(got, want.Cases[i].IDs) && len(got)+len(want.Cases[i].IDs) > 0 {
					errs <- want.Cases[i].Text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode(%.40q) differs from the fixture", s)
	}
}

// TestCacheBounded fills one tokenizer's cache beyond its bound.
func TestCacheBounded(t *testing.T) {
	tok, err := newGPT2("testdata/tiny_gpt2/vocab.json", "testdata/tiny_gpt2/merges.txt")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range cacheShards*cacheShardWords + 5000 {
		b.WriteString(" w")
		for x := i; x > 0; x /= 26 {
			b.WriteByte(byte('a' + x%26))
		}
	}
	text := b.String()
	ids := tok.Encode(text)
	if tok.Decode(ids) != text {
		t.Fatal("round trip failed")
	}
	n := 0
	for i := range tok.model.cache.shards {
		s := &tok.model.cache.shards[i]
		if len(s.m) > cacheShardWords {
			t.Fatalf("shard %d holds %d words, bound %d", i, len(s.m), cacheShardWords)
		}
		n += len(s.m)
	}
	if n < cacheShards*cacheShardWords/2 {
		t.Errorf("the cache holds only %d words", n)
	}
	if again := tok.Encode(text); !slices.Equal(again, ids) {
		t.Error("encoding again with a full cache gives other ids")
	}
}
