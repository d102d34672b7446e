package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// bpeTokenizer is a byte-level BPE tokenizer: GPT2BPETokenizer and HuggingFaceTokenizer.
// Encoding cuts the text at the added tokens (matched as whole strings, see addedVocab),
// pre-tokenizes each other segment with GPT-2's pattern (nextPiece), BPE-encodes each
// piece's bytes (bpeModel) and wraps the result in the post-processor's prefix and suffix.
type bpeTokenizer struct {
	name  string
	model *bpeModel
	added *addedVocab // nil: no added tokens

	addPrefixSpace bool // a segment not starting with ' ' gets one (ByteLevel add_prefix_space)
	useRegex       bool // pre-tokenize with GPT-2's pattern; false: each segment is one word

	prefix, suffix []int32 // the post-processor's ids around the text's

	decode    []string // id → the bytes it decodes to
	known     []bool   // id → whether it is a token
	vocabSize int
	eod       int32
}

func (t *bpeTokenizer) Name() string   { return t.name }
func (t *bpeTokenizer) VocabSize() int { return t.vocabSize }
func (t *bpeTokenizer) EOD() int32     { return t.eod }

// Encode returns the ids of text.
func (t *bpeTokenizer) Encode(text string) []int32 {
	out := make([]int32, 0, len(t.prefix)+len(text)/3+len(t.suffix)+4)
	out = append(out, t.prefix...)
	if t.added == nil {
		out = t.encodeSegment(out, text)
	} else {
		for _, sp := range t.added.split(text) {
			if sp.id >= 0 {
				out = append(out, sp.id)
			} else {
				out = t.encodeSegment(out, text[sp.start:sp.end])
			}
		}
	}
	return append(out, t.suffix...)
}

func (t *bpeTokenizer) encodeSegment(out []int32, seg string) []int32 {
	if seg == "" {
		return out
	}
	if t.addPrefixSpace && seg[0] != ' ' {
		seg = " " + seg
	}
	if !t.useRegex {
		return t.model.appendWord(out, seg)
	}
	for i := 0; i < len(seg); {
		j := nextPiece(seg, i)
		out = t.model.appendWord(out, seg[i:j])
		i = j
	}
	return out
}

// Decode returns the text of ids: the bytes of each token (its byte-level spelling decoded,
// or an added token's own text), U+FFFD for an id that is not a token, then each run of
// invalid UTF-8 replaced by U+FFFD.
func (t *bpeTokenizer) Decode(ids []int32) string {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.known) && t.known[id] {
			buf = append(buf, t.decode[id]...)
		} else {
			buf = append(buf, "\uFFFD"...)
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return strings.ToValidUTF8(string(buf), "\uFFFD")
}

// bpeSpec is what a byte-level BPE tokenizer is made of, whatever file it came from.
type bpeSpec struct {
	name  string
	vocab map[string]int32 // token in the byte-level alphabet → id
	rules []mergeRule      // the merges, highest priority first
	added []addedToken     // tokens matched as whole strings before pre-tokenization

	unk            int32 // -1: none
	fuseUnk        bool
	ignoreMerges   bool
	addPrefixSpace bool
	useRegex       bool
	prefix, suffix []int32
	eod            int32
}

// build makes the tokenizer. The vocabulary size is the largest id plus one.
func (s *bpeSpec) build() *bpeTokenizer {
	maxID := int32(-1)
	for _, id := range s.vocab {
		maxID = max(maxID, id)
	}
	for _, a := range s.added {
		maxID = max(maxID, a.id)
	}
	n := int(maxID) + 1
	t := &bpeTokenizer{
		name:           s.name,
		model:          &bpeModel{unkID: s.unk, fuseUnk: s.fuseUnk},
		addPrefixSpace: s.addPrefixSpace,
		useRegex:       s.useRegex,
		prefix:         s.prefix,
		suffix:         s.suffix,
		decode:         make([]string, n),
		known:          make([]bool, n),
		vocabSize:      n,
		eod:            s.eod,
	}
	m := t.model
	for b := range 256 {
		id, ok := s.vocab[byteRunes[b]]
		if !ok {
			id = -1
		}
		m.byteID[b] = id
	}
	m.merges = make(map[uint64]merge, len(s.rules))
	for rank, r := range s.rules {
		// A pair listed twice keeps its last rank, as Hugging Face's and GPT-2's loaders do.
		m.merges[pairKey(r.a, r.b)] = merge{rank: int32(rank), id: r.id}
	}
	if s.ignoreMerges {
		m.wholeWord = make(map[string]int32, len(s.vocab))
	}
	for tok, id := range s.vocab {
		if raw, ok := fromByteLevel(tok); ok {
			t.decode[id] = string(raw)
			if m.wholeWord != nil {
				m.wholeWord[string(raw)] = id
			}
		} else {
			t.decode[id] = tok
		}
		t.known[id] = true
	}
	for _, a := range s.added {
		t.decode[a.id] = tokenBytes(a.content)
		t.known[a.id] = true
	}
	if len(s.added) > 0 {
		t.added = newAddedVocab(s.added)
	}
	return t
}
