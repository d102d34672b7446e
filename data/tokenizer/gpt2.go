package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// gpt2EOD is GPT-2's end-of-document token, id 50256.
const gpt2EOD = "<|endoftext|>"

// gpt2Ranks is the file of GPT-2's ranks in the Go module github.com/pkoukk/tiktoken-go-loader.
const gpt2Ranks = "r50k_base.tiktoken"

// newGPT2 returns GPT2BPETokenizer: from vocab.json and merges.txt when both paths are
// given, else (both empty) from GPT-2's vocabulary built into gotron.
//
// It is GPT-2's tokenizer as Megatron's GPT2BPETokenizer runs it (Hugging Face's GPT-2
// tokenizer on these files): the text is cut at each "<|endoftext|>", which is the end-of-
// document id (50256 in GPT-2's files); each other segment is pre-tokenized with GPT-2's
// pattern and each piece BPE-encoded. Nothing is added before or after the text.
func newGPT2(vocabFile, mergeFile string) (*bpeTokenizer, error) {
	switch {
	case vocabFile == "" && mergeFile == "":
		return embeddedGPT2()
	case mergeFile == "":
		return nil, fmt.Errorf("--vocab-file is set but --merge-file is not: %s reads both (or neither, for GPT-2's vocabulary built into gotron)", TypeGPT2BPE)
	case vocabFile == "":
		return nil, fmt.Errorf("--merge-file is set but --vocab-file is not: %s reads both (or neither, for GPT-2's vocabulary built into gotron)", TypeGPT2BPE)
	}
	vdata, err := os.ReadFile(vocabFile)
	if err != nil {
		return nil, fmt.Errorf("--vocab-file: %v", err)
	}
	vname := "--vocab-file " + vocabFile
	vocab, err := parseVocab(vname, vdata, 0)
	if err != nil {
		return nil, err
	}
	eod, ok := vocab[gpt2EOD]
	if !ok {
		return nil, fmt.Errorf("%s: no %s token (GPT-2's end of document)", vname, gpt2EOD)
	}
	for b := range 256 {
		if _, ok := vocab[byteRunes[b]]; !ok {
			return nil, fmt.Errorf("%s: no token for the byte 0x%02x (%q): a byte-level vocabulary has one for each of the 256 bytes", vname, b, byteRunes[b])
		}
	}
	mdata, err := os.ReadFile(mergeFile)
	if err != nil {
		return nil, fmt.Errorf("--merge-file: %v", err)
	}
	rules, err := parseMerges("--merge-file "+mergeFile, mdata, vocab, "the vocabulary ("+vocabFile+")")
	if err != nil {
		return nil, err
	}
	return gpt2Spec(vocab, rules, eod).build(), nil
}

func gpt2Spec(vocab map[string]int32, rules []mergeRule, eod int32) *bpeSpec {
	return &bpeSpec{
		name:     TypeGPT2BPE,
		vocab:    vocab,
		rules:    rules,
		added:    []addedToken{{content: gpt2EOD, id: eod}},
		unk:      -1,
		useRegex: true,
		eod:      eod,
	}
}

// GPT-2's vocabulary built into gotron: the ranks of r50k_base (tiktoken's name for GPT-2's
// encoding) embedded by the module github.com/pkoukk/tiktoken-go-loader, from which
// ranksToMerges derives the merges. Parsed once, on first use.
var builtin struct {
	once  sync.Once
	toks  []string    // token bytes by id, without <|endoftext|>
	rules []mergeRule // GPT-2's merges.txt, in order
	tok   *bpeTokenizer
	err   error
}

func loadBuiltin() error {
	builtin.once.Do(func() {
		data, err := assets.Assets.ReadFile(gpt2Ranks)
		if err != nil {
			builtin.err = fmt.Errorf("GPT-2's built-in vocabulary: %v", err)
			return
		}
		toks, err := parseRanks(gpt2Ranks, data)
		if err == nil {
			builtin.rules, err = ranksToMerges(toks)
		}
		if err != nil {
			builtin.err = fmt.Errorf("GPT-2's built-in vocabulary: %v", err)
			return
		}
		builtin.toks = toks
		vocab := make(map[string]int32, len(toks)+1)
		for id, t := range toks {
			vocab[toByteLevel(t)] = int32(id)
		}
		eod := int32(len(toks))
		vocab[gpt2EOD] = eod
		builtin.tok = gpt2Spec(vocab, builtin.rules, eod).build()
	})
	return builtin.err
}

func embeddedGPT2() (*bpeTokenizer, error) {
	if err := loadBuiltin(); err != nil {
		return nil, err
	}
	return builtin.tok, nil
}

// WriteGPT2Files writes GPT-2's vocab.json and merges.txt, derived from the vocabulary
// built into gotron, to dir (created if missing), for --vocab-file and --merge-file:
//
//   - vocab.json: one JSON object {"token": id, ...} in id order, tokens in the byte-level
//     alphabet with non-ASCII runes as \uXXXX escapes (as Python's json.dumps writes
//     them), 50257 tokens: the 50256 of r50k_base and "<|endoftext|>" = 50256;
//   - merges.txt: the line "#version: 0.2", then the 50000 merges "a b", one per line, in
//     priority order, in the byte-level alphabet (UTF-8).
func WriteGPT2Files(dir string) error {
	if err := loadBuiltin(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var v strings.Builder
	v.WriteByte('{')
	for id, t := range builtin.toks {
		if id > 0 {
			v.WriteString(", ")
		}
		writeJSONString(&v, toByteLevel(t))
		v.WriteString(": ")
		v.WriteString(strconv.Itoa(id))
	}
	v.WriteString(", ")
	writeJSONString(&v, gpt2EOD)
	fmt.Fprintf(&v, ": %d}", len(builtin.toks))
	var m strings.Builder
	m.WriteString("#version: 0.2\n")
	for _, r := range builtin.rules {
		m.WriteString(toByteLevel(builtin.toks[r.a]))
		m.WriteByte(' ')
		m.WriteString(toByteLevel(builtin.toks[r.b]))
		m.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(v.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "merges.txt"), []byte(m.String()), 0o644)
}

// writeJSONString writes s as a JSON string with ASCII output: '"' and '\' escaped,
// control and non-ASCII runes as \uXXXX (surrogate pairs above U+FFFF).
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r >= utf8.RuneSelf:
			if r > 0xFFFF {
				r -= 0x10000
				fmt.Fprintf(b, "\\u%04x\\u%04x", 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			} else {
				fmt.Fprintf(b, "\\u%04x", r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
