package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// gpt2Pattern is GPT-2's pre-tokenization regular expression, which the byte-level BPE
// tokenizers (GPT-2's encoder.py, Hugging Face's ByteLevel pre-tokenizer) apply with
// findall before BPE: BPE never merges across the pieces it cuts. Go's regexp has no
// lookahead, so [nextPiece] implements it by hand.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// Rune classes of the pattern: \p{L}, \p{N}, \s (the Unicode White_Space property, as in
// Python's regex module and Rust's regex) and everything else.
const (
	classOther uint8 = iota
	classLetter
	classNumber
	classSpace
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = slowClass(r)
	}
}

func slowClass(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.Is(unicode.White_Space, r):
		return classSpace
	}
	return classOther
}

// classAt returns the class of the rune at s[i] and its width in bytes. A byte that does
// not start valid UTF-8 is one rune of class other (width 1), so invalid text is cut into
// pieces too and byte-level BPE encodes its bytes unchanged.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return classOther, 1
	}
	return slowClass(r), w
}

// runEnd returns the end of the run of runes of class cl that starts at s[i:].
func runEnd(s string, i int, cl uint8) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if c != cl {
			break
		}
		i += w
	}
	return i
}

// nextPiece returns the end of the piece of s that starts at i (i < len(s)): the match of
// gpt2Pattern at i, whose alternatives are tried in order, so that consecutive calls cut s
// exactly as findall does (every rune is in some class, so no byte is skipped):
//
//   - a contraction 's 't 're 've 'm 'll 'd (lower case, ASCII apostrophe);
//   - an optional space followed by a run of letters, of numbers, or of other runes;
//   - a run of whitespace not followed by a non-space: the whole run at the end of s, else
//     the run without its last rune (which then leads the next piece, as the space in
//     " word"), if that leaves anything;
//   - else a run of whitespace (one whitespace rune before a non-space).
func nextPiece(s string, i int) int {
	c := s[i]
	if c == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	if c == ' ' && i+1 < len(s) {
		if cl, w := classAt(s, i+1); cl != classSpace {
			return runEnd(s, i+1+w, cl)
		}
	}
	cl, w := classAt(s, i)
	if cl != classSpace {
		return runEnd(s, i+w, cl)
	}
	end := runEnd(s, i+w, classSpace)
	if end == len(s) {
		return end
	}
	// Back off the last whitespace rune, if the run has more than one.
	_, last := utf8.DecodeLastRuneInString(s[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

// pieces returns the pre-tokenization of s (for tests and tools; the encoders call
// nextPiece directly).
func pieces(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := nextPiece(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}
