package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
)

// nullTokenizer is NullTokenizer: the text is already token ids, written as decimal
// integers separated by spaces ("15496 995"), for benchmarks and pre-tokenized data.
//
// As Megatron-Core's NullTokenizer today, --vocab-size N gives the vocabulary size N and
// the end-of-document id N−1 (the last id). (Megatron's legacy _NullTokenizer, before
// Megatron-Core's tokenizers, made it N+1 ids with the end of document N.)
type nullTokenizer struct{ n int }

func newNull(n int) (nullTokenizer, error) {
	if n < 1 || n > 1<<31-1 {
		return nullTokenizer{}, fmt.Errorf("--vocab-size %d: %s needs a vocabulary size in [1, 2^31) (the end-of-document id is --vocab-size − 1)", n, TypeNull)
	}
	return nullTokenizer{n}, nil
}

func (t nullTokenizer) Name() string   { return TypeNull }
func (t nullTokenizer) VocabSize() int { return t.n }
func (t nullTokenizer) EOD() int32     { return int32(t.n - 1) }

// Encode parses the integers of text, separated by any whitespace. The reference splits on
// single spaces and fails on anything but an integer; Encode, which cannot fail, skips a
// field that is not an integer in [0, VocabSize()) (EncodeChecked reports it).
func (t nullTokenizer) Encode(text string) []int32 {
	ids, _ := t.parse(text, false)
	return ids
}

// EncodeChecked is Encode, failing on the first field that is not an integer in
// [0, VocabSize()).
func (t nullTokenizer) EncodeChecked(text string) ([]int32, error) {
	return t.parse(text, true)
}

func (t nullTokenizer) parse(text string, strict bool) ([]int32, error) {
	fields := strings.Fields(text)
	ids := make([]int32, 0, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 || v >= int64(t.n) {
			if strict {
				return nil, fmt.Errorf("%s: field %d, %q, is not a token id in [0, %d)", TypeNull, i+1, clip(f), t.n)
			}
			continue
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// Decode writes the ids as decimal integers separated by single spaces, as the reference
// does (ids outside the vocabulary too: the text is ASCII either way).
func (t nullTokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	return b.String()
}
