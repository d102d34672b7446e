package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
)

// maxVocab bounds the ids of a vocabulary file: ids are in [0, maxVocab). The largest
// vocabularies in use have about 2^18 tokens.
const maxVocab = 1 << 21

// parseVocab parses a vocabulary: a JSON object {"token": id, ...} mapping each token,
// spelled in the byte-level alphabet, to its id, an integer in [0, 2^21) (GPT-2's
// encoder.json, Hugging Face's vocab.json and tokenizer.json's model.vocab). Tokens and
// ids must be unique. name prefixes the errors, which give the byte offset in data (plus
// base, the offset of data in its file).
func parseVocab(name string, data []byte, base int64) (map[string]int32, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	at := func(off int64, format string, args ...any) error {
		return fmt.Errorf("%s: offset %d: %s", name, base+off, fmt.Sprintf(format, args...))
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return at(se.Offset, "%v", err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return at(dec.InputOffset(), "unexpected end of the JSON object")
		}
		return at(dec.InputOffset(), "%v", err)
	}
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty, want a JSON object {\"token\": id, ...}", name)
	}
	if err != nil {
		return nil, syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, at(0, "want a JSON object {\"token\": id, ...}, got %s", describeToken(tok))
	}
	ids := make(map[string]int32)
	byID := make(map[int32]string)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key := kt.(string) // an object's keys are strings, or Token fails
		off := valueStart(data, dec.InputOffset())
		vt, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		num, ok := vt.(json.Number)
		if !ok {
			return nil, at(off, "token %q: the id must be an integer, got %s", key, describeToken(vt))
		}
		v, err := num.Int64()
		if err != nil || v < 0 || v >= maxVocab {
			return nil, at(off, "token %q: id %s is not an integer in [0, %d)", key, num, maxVocab)
		}
		id := int32(v)
		if _, dup := ids[key]; dup {
			return nil, at(off, "token %q appears twice", key)
		}
		if other, dup := byID[id]; dup {
			return nil, at(off, "tokens %q and %q have the same id %d", other, key, id)
		}
		ids[key] = id
		byID[id] = key
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, syntax(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, at(dec.InputOffset(), "unexpected data after the JSON object")
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: the vocabulary is empty", name)
	}
	return ids, nil
}

// valueStart returns the offset of the value after a key that ends at off: past the
// whitespace and the colon.
func valueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n:", data[off]) >= 0 {
		off++
	}
	return off
}

func describeToken(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %q", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", t)
}

// mergeRule is one merge in id space: the adjacent tokens a, b become id.
type mergeRule struct{ a, b, id int32 }

// parseMerges parses merges.txt: one merge "a b" per line (two tokens in the byte-level
// alphabet, one space between), the first line the highest priority. Lines starting with
// "#version" (GPT-2's first line is "#version: 0.2") and blank lines are skipped; line
// ends may be "\n" or "\r\n". Both tokens and their concatenation must be in vocab.
// name prefixes the errors, which give the line number.
func parseMerges(name string, data []byte, vocab map[string]int32, vocabName string) ([]mergeRule, error) {
	var rules []mergeRule
	for n, line := range lines(data) {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || strings.HasPrefix(line, "#version") {
			continue
		}
		a, b, ok := cutMerge(line)
		if !ok {
			return nil, fmt.Errorf("%s: line %d: %q is not a merge \"a b\" (two tokens separated by one space)", name, n, clip(line))
		}
		r, err := ruleOf(a, b, vocab, vocabName)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", name, n, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// lines yields the lines of data with their numbers from 1, split at "\n" (a last line
// without one included, no empty line after a final "\n").
func lines(data []byte) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		text := string(data)
		for n := 1; len(text) > 0; n++ {
			line := text
			if i := strings.IndexByte(text, '\n'); i >= 0 {
				line, text = text[:i], text[i+1:]
			} else {
				text = ""
			}
			if !yield(n, line) {
				return
			}
		}
	}
}

// cutMerge splits a merge "a b": two non-empty tokens separated by one space.
func cutMerge(line string) (a, b string, ok bool) {
	a, b, ok = strings.Cut(line, " ")
	return a, b, ok && a != "" && b != "" && !strings.Contains(b, " ")
}

// ruleOf looks up the merge of a and b.
func ruleOf(a, b string, vocab map[string]int32, vocabName string) (mergeRule, error) {
	ia, ok := vocab[a]
	if !ok {
		return mergeRule{}, fmt.Errorf("merge %q: %q is not in %s", clip(a+" "+b), clip(a), vocabName)
	}
	ib, ok := vocab[b]
	if !ok {
		return mergeRule{}, fmt.Errorf("merge %q: %q is not in %s", clip(a+" "+b), clip(b), vocabName)
	}
	ic, ok := vocab[a+b]
	if !ok {
		return mergeRule{}, fmt.Errorf("merge %q: its result %q is not in %s", clip(a+" "+b), clip(a+b), vocabName)
	}
	return mergeRule{ia, ib, ic}, nil
}

// clipJSON is raw JSON for an error message on one line: compacted (a
// value spread over lines, as tokenizer files write them, loses its
// newlines), else quoted, then clipped.
func clipJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return strconv.Quote(clip(string(raw)))
	}
	return clip(b.String())
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return strings.ToValidUTF8(s[:80], "") + "..."
	}
	return s
}
