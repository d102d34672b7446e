package data

import "strings"

// EndOfDocument is the token that ends every document of a text corpus: byte 0 (NUL),
// which never occurs in Go source or other text files (files containing it are treated as
// binary and not loaded, see [LoadTextCorpus]).
const EndOfDocument int32 = 0

// ByteTokenizer is the byte-level tokenizer: each byte of the UTF-8 text is one token, so
// the vocabulary has 256 tokens and every text can be encoded.
type ByteTokenizer struct{}

// Vocab returns the vocabulary size, 256.
func (ByteTokenizer) Vocab() int { return 256 }

// Encode returns the bytes of s as tokens.
func (ByteTokenizer) Encode(s string) []int32 {
	ids := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int32(s[i])
	}
	return ids
}

// Decode returns the text of ids. It inverts Encode on valid UTF-8 text. A sampled
// sequence may not be valid UTF-8: each run of bytes that is not is rendered as one
// U+FFFD replacement character, as is each id outside [0, 256), so the result is always
// valid UTF-8 and safe to print.
func (ByteTokenizer) Decode(ids []int32) string {
	var b strings.Builder
	b.Grow(len(ids))
	for _, id := range ids {
		if id < 0 || id > 255 {
			b.WriteString("\uFFFD")
			continue
		}
		b.WriteByte(byte(id))
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}
