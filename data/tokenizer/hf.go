package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// The parts of a Hugging Face tokenizer.json that gotron reads. Other keys (version,
// truncation, padding) do not change what the reference's tokenize returns and are
// ignored.
type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type hfAddedToken struct {
	ID         *int64  `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized bool    `json:"normalized"`
}

type hfModel struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   json.RawMessage   `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

type hfByteLevel struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// hfSupported is what the errors say gotron reads.
const hfSupported = "gotron reads byte-level BPE tokenizers (GPT-2's kind): model.type BPE, pre_tokenizer ByteLevel, decoder ByteLevel, no normalizer"

// newHuggingFace returns HuggingFaceTokenizer from --tokenizer-model path: a tokenizer.json
// file or a directory holding one. Its end of document is the reference's EOD, the
// tokenizer's eos_token: tokenizer_config.json's "eos_token" next to tokenizer.json, else
// special_tokens_map.json's, else the first of "<|endoftext|>", "</s>", "<|end_of_text|>",
// "<eos>" that is a token (an added token's id first, then the vocabulary's).
func newHuggingFace(path string) (*bpeTokenizer, error) {
	file := path
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--tokenizer-model: %v (gotron reads a local tokenizer.json, or the directory holding it)", err)
	} else if st.IsDir() {
		file = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer-model: %v", err)
	}
	name := "--tokenizer-model " + file
	spec, err := parseHF(name, data)
	if err != nil {
		return nil, err
	}
	eos, from, err := configEOS(filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	if from != "" {
		id, ok := spec.lookup(eos)
		if !ok {
			return nil, fmt.Errorf("--tokenizer-model %s: eos_token %q is not a token of %s", from, eos, file)
		}
		spec.eod = id
	} else if spec.eod < 0 {
		return nil, fmt.Errorf("%s: no end-of-document token: no eos_token in tokenizer_config.json or special_tokens_map.json next to it, and none of %q is a token", name, defaultEOS)
	}
	return spec.build(), nil
}

// defaultEOS are the end-of-document tokens tried without an eos_token in a config file.
var defaultEOS = []string{gpt2EOD, "</s>", "<|end_of_text|>", "<eos>"}

// lookup returns the id of tok: an added token's, else the vocabulary's.
func (s *bpeSpec) lookup(tok string) (int32, bool) {
	for _, a := range s.added {
		if a.content == tok {
			return a.id, true
		}
	}
	id, ok := s.vocab[tok]
	return id, ok
}

// parseHF parses a tokenizer.json (its errors start with name). The spec's eod is the
// first of defaultEOS that is a token, or -1.
func parseHF(name string, data []byte) (*bpeSpec, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonError(name, "", err, 0)
	}
	if len(f.Model) == 0 || isNull(f.Model) {
		return nil, fmt.Errorf("%s: no model; %s", name, hfSupported)
	}
	var m hfModel
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, jsonError(name, "model.", err, offsetIn(data, f.Model))
	}
	switch {
	case m.Type != "BPE" && !(m.Type == "" && m.Merges != nil):
		return nil, fmt.Errorf("%s: model.type %q is not supported; %s", name, m.Type, hfSupported)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("%s: model.dropout %v is not supported (BPE dropout is for training a tokenizer); set it to null", name, *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("%s: model.continuing_subword_prefix %q is not supported; %s", name, *m.ContinuingSubwordPrefix, hfSupported)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("%s: model.end_of_word_suffix %q is not supported; %s", name, *m.EndOfWordSuffix, hfSupported)
	case m.ByteFallback:
		return nil, fmt.Errorf("%s: model.byte_fallback true is not supported; %s", name, hfSupported)
	}
	if err := checkType(name, "normalizer", data, f.Normalizer, ""); err != nil {
		return nil, err
	}
	if err := checkType(name, "decoder", data, f.Decoder, "ByteLevel"); err != nil {
		return nil, err
	}
	if err := checkType(name, "pre_tokenizer", data, f.PreTokenizer, "ByteLevel"); err != nil {
		return nil, err
	}
	var pre hfByteLevel
	if err := json.Unmarshal(f.PreTokenizer, &pre); err != nil {
		return nil, jsonError(name, "pre_tokenizer.", err, offsetIn(data, f.PreTokenizer))
	}
	if len(m.Vocab) == 0 || isNull(m.Vocab) {
		return nil, fmt.Errorf("%s: model.vocab is missing", name)
	}
	vocab, err := parseVocab(name+": model.vocab", m.Vocab, offsetIn(data, m.Vocab))
	if err != nil {
		return nil, err
	}
	rules, err := parseHFMerges(name, m.Merges, vocab)
	if err != nil {
		return nil, err
	}
	spec := &bpeSpec{
		name:           TypeHuggingFace,
		vocab:          vocab,
		rules:          rules,
		unk:            -1,
		fuseUnk:        m.FuseUnk,
		ignoreMerges:   m.IgnoreMerges,
		addPrefixSpace: pre.AddPrefixSpace,
		useRegex:       pre.UseRegex == nil || *pre.UseRegex,
		eod:            -1,
	}
	if m.UnkToken != nil {
		id, ok := vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("%s: model.unk_token %q is not in model.vocab", name, *m.UnkToken)
		}
		spec.unk = id
	}
	for i, a := range f.AddedTokens {
		if a.ID == nil || a.Content == nil || *a.Content == "" || *a.ID < 0 || *a.ID >= maxVocab {
			return nil, fmt.Errorf("%s: added_tokens[%d]: want an id in [0, %d) and a non-empty content", name, i, maxVocab)
		}
		spec.added = append(spec.added, addedToken{
			content: *a.Content, id: int32(*a.ID),
			singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip, normalized: a.Normalized,
		})
	}
	if spec.prefix, spec.suffix, err = parsePost(name, "post_processor", data, f.PostProcessor); err != nil {
		return nil, err
	}
	for _, id := range append(append([]int32(nil), spec.prefix...), spec.suffix...) {
		if !spec.isToken(id) {
			return nil, fmt.Errorf("%s: post_processor adds the id %d, which is not a token", name, id)
		}
	}
	for _, e := range defaultEOS {
		if id, ok := spec.lookup(e); ok {
			spec.eod = id
			break
		}
	}
	return spec, nil
}

// isToken reports whether id is a token of the spec (a linear search: for the few ids
// of a post-processor).
func (s *bpeSpec) isToken(id int32) bool {
	for _, a := range s.added {
		if a.id == id {
			return true
		}
	}
	for _, v := range s.vocab {
		if v == id {
			return true
		}
	}
	return false
}

// parseHFMerges reads model.merges: each merge is the string "a b" or the array ["a", "b"].
func parseHFMerges(name string, merges []json.RawMessage, vocab map[string]int32) ([]mergeRule, error) {
	rules := make([]mergeRule, 0, len(merges))
	for i, raw := range merges {
		var a, b string
		var line string
		var pair []string
		switch {
		case json.Unmarshal(raw, &line) == nil:
			var ok bool
			a, b, ok = cutMerge(line)
			if !ok {
				return nil, fmt.Errorf("%s: model.merges[%d]: %q is not a merge \"a b\" (two tokens separated by one space)", name, i, clip(line))
			}
		case json.Unmarshal(raw, &pair) == nil && len(pair) == 2 && pair[0] != "" && pair[1] != "":
			a, b = pair[0], pair[1]
		default:
			return nil, fmt.Errorf("%s: model.merges[%d]: want \"a b\" or [\"a\", \"b\"], got %s", name, i, clipJSON(raw))
		}
		r, err := ruleOf(a, b, vocab, "model.vocab")
		if err != nil {
			return nil, fmt.Errorf("%s: model.merges[%d]: %v", name, i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// checkType checks that the component raw ({"type": ...}, a part of data) is of type
// want, or null/absent when want is "".
func checkType(name, field string, data []byte, raw json.RawMessage, want string) error {
	got := ""
	if len(raw) > 0 && !isNull(raw) {
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return jsonError(name, field+".", err, offsetIn(data, raw))
		}
		got = t.Type
		if got == "" {
			got = "(no type)"
		}
	}
	if got == want {
		return nil
	}
	if want == "" {
		return fmt.Errorf("%s: %s.type %q is not supported; %s", name, field, got, hfSupported)
	}
	if got == "" {
		return fmt.Errorf("%s: %s is null; %s", name, field, hfSupported)
	}
	return fmt.Errorf("%s: %s.type %q is not supported; %s", name, field, got, hfSupported)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonError names the file, the byte offset (plus base, the offset in the file of the
// part that was parsed) and, for a value of the wrong type, its field (after prefix, the
// path of the part).
func jsonError(name, prefix string, err error, base int64) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%s: offset %d: %v", name, base+se.Offset, err)
	case errors.As(err, &te):
		field := prefix + te.Field
		if field == "" {
			field = "the document"
		}
		want := "a " + te.Type.Kind().String()
		switch te.Type.Kind() {
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
			want = "a number"
		case reflect.Bool:
			want = "true or false"
		}
		return fmt.Errorf("%s: offset %d: %s is a JSON %s, want %s", name, base+te.Offset, strings.TrimSuffix(field, "."), te.Value, want)
	}
	return fmt.Errorf("%s: %v", name, err)
}

// offsetIn returns the offset of part in data (a json.RawMessage holds a copy of the
// bytes, so it is found by searching), 0 if not found.
func offsetIn(data, part []byte) int64 {
	if i := bytes.Index(data, part); i > 0 {
		return int64(i)
	}
	return 0
}
