package tokenizer

import (
	"fmt"
	"strings"
)

// Tokenizer turns text into token ids and back. Implementations are safe for concurrent
// use by several goroutines.
type Tokenizer interface {
	// Name is the --tokenizer-type name.
	Name() string
	// VocabSize is the size of the vocabulary: ids are in [0, VocabSize()).
	VocabSize() int
	// EOD is the end-of-document id that --append-eod appends to each document and
	// --eod-mask-loss masks.
	EOD() int32
	// Encode returns the ids of text.
	Encode(text string) []int32
	// Decode returns the text of ids. The result is always valid UTF-8, safe to print:
	// each run of bytes that is not valid UTF-8 becomes one U+FFFD replacement character,
	// and so does each id outside the vocabulary.
	Decode(ids []int32) string
}

// CheckedEncoder is implemented by the tokenizers whose text can be malformed
// (NullTokenizer's, which must be integers): EncodeChecked is Encode, but fails where
// Encode skips.
type CheckedEncoder interface {
	EncodeChecked(text string) ([]int32, error)
}

// Options are the tokenizer flags, with Megatron's names.
type Options struct {
	Type           string // --tokenizer-type, one of Types()
	VocabFile      string // --vocab-file: GPT2BPETokenizer's vocab.json
	MergeFile      string // --merge-file: GPT2BPETokenizer's merges.txt
	TokenizerModel string // --tokenizer-model: HuggingFaceTokenizer's tokenizer.json, or its directory
	VocabSize      int    // --vocab-size: NullTokenizer's vocabulary size
}

// The --tokenizer-type names.
const (
	TypeGPT2BPE     = "GPT2BPETokenizer"
	TypeHuggingFace = "HuggingFaceTokenizer"
	TypeNull        = "NullTokenizer"
	TypeByteLevel   = "ByteLevelTokenizer"
)

// Types returns the supported --tokenizer-type names.
func Types() []string {
	return []string{TypeGPT2BPE, TypeHuggingFace, TypeNull, TypeByteLevel}
}

// New returns the tokenizer o describes. Its errors are one line and name the flag at
// fault. Flags a type does not use are ignored, as the reference does.
func New(o Options) (Tokenizer, error) {
	switch o.Type {
	case TypeGPT2BPE:
		return asTokenizer(newGPT2(o.VocabFile, o.MergeFile))
	case TypeHuggingFace:
		if o.TokenizerModel == "" {
			return nil, fmt.Errorf("--tokenizer-type %s needs --tokenizer-model, the path of a tokenizer.json file or of the directory holding it", TypeHuggingFace)
		}
		return asTokenizer(newHuggingFace(o.TokenizerModel))
	case TypeNull:
		return asTokenizer(newNull(o.VocabSize))
	case TypeByteLevel:
		return byteLevel{}, nil
	case "":
		return nil, fmt.Errorf("--tokenizer-type is empty; supported: %s", strings.Join(Types(), ", "))
	}
	return nil, fmt.Errorf("--tokenizer-type %q is not supported; supported: %s", o.Type, strings.Join(Types(), ", "))
}

// CheckFiles returns an error when o names a tokenizer's files but no type: the files
// would be ignored.
func (o Options) CheckFiles() error {
	if o.Type != "" {
		return nil
	}
	for _, f := range []struct{ flag, v string }{{"--vocab-file", o.VocabFile}, {"--merge-file", o.MergeFile}, {"--tokenizer-model", o.TokenizerModel}} {
		if f.v != "" {
			return fmt.Errorf("%s without --tokenizer-type: name the tokenizer (%s)", f.flag, strings.Join(Types(), ", "))
		}
	}
	return nil
}

// asTokenizer returns a nil Tokenizer with an error (not a nil pointer in an interface).
func asTokenizer[T Tokenizer](t T, err error) (Tokenizer, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}
