package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet ("bytes_to_unicode"): every byte b is written as one printable
// rune, so that a vocabulary of byte strings can be stored as JSON text. The 188 bytes that
// are printable Latin-1 — 0x21–0x7E ('!'..'~'), 0xA1–0xAC and 0xAE–0xFF — stand for
// themselves (U+0021.., U+00A1.., U+00AE..); the other 68 (0x00–0x20, 0x7F–0xA0, 0xAD) are
// given U+0100, U+0101, ... in increasing byte order, so the space 0x20 is U+0120 'Ġ' and the
// newline 0x0A is U+010A 'Ċ'. vocab.json, merges.txt and a tokenizer.json with a ByteLevel
// pre-tokenizer all spell tokens in this alphabet.
var (
	byteRune  [256]rune     // byte → its rune
	runeByte  map[rune]byte // rune → its byte, for the 256 runes of the alphabet
	byteRunes [256]string   // byte → the UTF-8 of its rune
)

func init() {
	runeByte = make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		printable := (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = 256 + n
			n++
		}
		byteRune[b] = r
		runeByte[r] = byte(b)
		byteRunes[b] = string(r)
	}
}

// toByteLevel spells the bytes of s in the byte-level alphabet (GPT-2's byte_encoder).
func toByteLevel(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteRune[s[i]])
	}
	return string(buf)
}

// fromByteLevel returns the bytes a byte-level token stands for (GPT-2's byte_decoder), and
// false when the token has a rune outside the alphabet or is not valid UTF-8.
func fromByteLevel(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); {
		r, w := utf8.DecodeRuneInString(tok[i:])
		if r == utf8.RuneError && w <= 1 {
			return nil, false
		}
		b, ok := runeByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
		i += w
	}
	return out, true
}

// tokenBytes is what a token decodes to under Hugging Face's ByteLevel decoder: its bytes
// when every rune is in the byte-level alphabet, else its own UTF-8 text (an added token
// such as "<|im_start|>" is ASCII and so in the alphabet; one such as "→" is not).
func tokenBytes(tok string) string {
	if b, ok := fromByteLevel(tok); ok {
		return string(b)
	}
	return tok
}
