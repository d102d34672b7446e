package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is a token matched as a whole string in the text before pre-tokenization
// (Hugging Face's added_tokens, e.g. "<|endoftext|>"), with its matching options.
type addedToken struct {
	content    string
	id         int32
	singleWord bool // match only where neither neighbour is a word rune
	lstrip     bool // the match takes the whitespace before it
	rstrip     bool // the match takes the whitespace after it
	normalized bool // matched after the non-normalized ones, in the text they leave
}

// addedVocab cuts a text at its added tokens, as Hugging Face's AddedVocabulary does: first
// the non-normalized tokens over the whole text, then the normalized ones over each segment
// left (there is no normalizer, so the segment's text is the normalized text). Each pass
// takes the leftmost match, the longest among those starting there, then continues after
// it; a single-word match with a word rune next to it is dropped.
type addedVocab struct {
	raw, norm matcher
}

// matcher finds the leftmost-longest occurrence of any of its tokens.
type matcher struct {
	first  [256][]addedToken // by first byte, longest first
	any    bool
	firsts []byte // the distinct first bytes
}

// span is a part of a text: an added token's match (id ≥ 0) or text to pre-tokenize (-1).
type span struct {
	start, end int
	id         int32
}

func newAddedVocab(tokens []addedToken) *addedVocab {
	a := &addedVocab{}
	for _, t := range tokens {
		if t.content == "" {
			continue
		}
		m := &a.raw
		if t.normalized {
			m = &a.norm
		}
		if len(m.first[t.content[0]]) == 0 {
			m.firsts = append(m.firsts, t.content[0])
		}
		m.first[t.content[0]] = append(m.first[t.content[0]], t)
		m.any = true
	}
	for _, m := range []*matcher{&a.raw, &a.norm} {
		for b := range m.first {
			sort.SliceStable(m.first[b], func(i, j int) bool {
				return len(m.first[b][i].content) > len(m.first[b][j].content)
			})
		}
	}
	return a
}

// split returns the spans of text, in order, covering it.
func (a *addedVocab) split(text string) []span {
	spans := a.raw.find(text, 0, nil)
	if !a.norm.any {
		return spans
	}
	var out []span
	for _, sp := range spans {
		if sp.id >= 0 {
			out = append(out, sp)
			continue
		}
		out = a.norm.find(text[sp.start:sp.end], sp.start, out)
	}
	return out
}

// next returns the leftmost-longest match in s at or after i, or ok false.
func (m *matcher) next(s string, i int) (t addedToken, start int, ok bool) {
	if len(m.firsts) == 1 { // GPT-2's "<|endoftext|>": skip to each '<' (vectorized)
		for i < len(s) {
			j := strings.IndexByte(s[i:], m.firsts[0])
			if j < 0 {
				break
			}
			i += j
			for _, c := range m.first[s[i]] {
				if strings.HasPrefix(s[i:], c.content) {
					return c, i, true
				}
			}
			i++
		}
		return addedToken{}, 0, false
	}
	for ; i < len(s); i++ {
		for _, c := range m.first[s[i]] {
			if strings.HasPrefix(s[i:], c.content) {
				return c, i, true
			}
		}
	}
	return addedToken{}, 0, false
}

// find appends to out the spans of s (whose offset in the whole text is base): the matches
// of m and the text between them.
func (m *matcher) find(s string, base int, out []span) []span {
	if s == "" {
		return out
	}
	done := 0 // s[:done] is covered
	for i := 0; m.any; {
		t, start, ok := m.next(s, i)
		if !ok {
			break
		}
		stop := start + len(t.content)
		i = stop
		if start < done {
			continue // inside the whitespace a previous match took
		}
		if t.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if t.lstrip {
			start = max(start-trailingSpace(s[:start]), done)
		}
		if t.rstrip {
			stop += leadingSpace(s[stop:])
		}
		if done < start {
			out = append(out, span{base + done, base + start, -1})
		}
		out = append(out, span{base + start, base + stop, t.id})
		done = stop
	}
	if done < len(s) {
		out = append(out, span{base + done, base + len(s), -1})
	}
	return out
}

// isWordRune reports whether r is matched by \w in Rust's regex (Unicode): Alphabetic,
// marks, decimal digits, connector punctuation and the joiners.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Join_Control, r)
}

func isSpaceRune(r rune) bool { return unicode.Is(unicode.White_Space, r) }

func endsWithWord(s string) bool {
	r, w := utf8.DecodeLastRuneInString(s)
	return w > 0 && !(r == utf8.RuneError && w == 1) && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, w := utf8.DecodeRuneInString(s)
	return w > 0 && !(r == utf8.RuneError && w == 1) && isWordRune(r)
}

// trailingSpace returns the length in bytes of the whitespace that ends s.
func trailingSpace(s string) int {
	n := 0
	for len(s) > n {
		r, w := utf8.DecodeLastRuneInString(s[:len(s)-n])
		if r == utf8.RuneError && w == 1 || !isSpaceRune(r) {
			break
		}
		n += w
	}
	return n
}

// leadingSpace returns the length in bytes of the whitespace that starts s.
func leadingSpace(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if r == utf8.RuneError && w == 1 || !isSpaceRune(r) {
			break
		}
		n += w
	}
	return n
}
