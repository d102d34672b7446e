package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/gotron/gotron/data/tokenizer"
)

// tokenizerFlags are Megatron's tokenizer flags, shared by preprocess, train and inspect
// samples.
type tokenizerFlags struct {
	o tokenizer.Options
}

// addTokenizerFlags registers --tokenizer-type, --vocab-file, --merge-file and
// --tokenizer-model; vocabSize is the command's --vocab-size (NullTokenizer's size),
// registered by the caller.
func addTokenizerFlags(f *pflag.FlagSet) *tokenizerFlags {
	t := &tokenizerFlags{}
	f.StringVar(&t.o.Type, "tokenizer-type", "", "the tokenizer: "+strings.Join(tokenizer.Types(), ", "))
	f.StringVar(&t.o.VocabFile, "vocab-file", "", "GPT2BPETokenizer: GPT-2's vocab.json (with --merge-file; both unset: GPT-2's vocabulary built into gotron)")
	f.StringVar(&t.o.MergeFile, "merge-file", "", "GPT2BPETokenizer: GPT-2's merges.txt")
	f.StringVar(&t.o.TokenizerModel, "tokenizer-model", "", "HuggingFaceTokenizer: a tokenizer.json file (or a directory holding one)")
	return t
}

// options returns the flags' options. Megatron's GPT example scripts pass
// --vocab-file and --merge-file without --tokenizer-type (which Megatron
// then refuses): the two files are GPT-2's, which only GPT2BPETokenizer
// reads, so that type is taken, and note says so.
func (t *tokenizerFlags) options() (o tokenizer.Options, note string) {
	o = t.o
	if o.Type == "" && o.VocabFile != "" && o.MergeFile != "" && o.TokenizerModel == "" {
		o.Type = tokenizer.TypeGPT2BPE
		note = "tokenizer: --tokenizer-type " + o.Type + ", the one that reads --vocab-file and --merge-file (Megatron asks for the type)"
	}
	return o, note
}

// build returns the tokenizer the flags name, or nil when --tokenizer-type is unset.
// vocabSize is the command's --vocab-size (NullTokenizer).
func (t *tokenizerFlags) build(vocabSize int) (tokenizer.Tokenizer, error) {
	o, _ := t.options()
	if err := o.CheckFiles(); err != nil || o.Type == "" {
		return nil, err
	}
	o.VocabSize = vocabSize
	return tokenizer.New(o)
}
