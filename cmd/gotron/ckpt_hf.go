package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/ckpt/hf"
	"github.com/gotron/gotron/data/tokenizer"
	"github.com/gotron/gotron/train"
)

// tokenizerFiles are the tokenizer files --to-hf copies beside the
// weights: GPT-2's vocab.json and merges.txt, or a Hugging Face
// tokenizer.json (a file, or a directory holding one).
type tokenizerFiles struct {
	vocab, merges, model string
	// gpt2 writes GPT-2's own vocab.json and merges.txt, built into
	// gotron (tokenizer.WriteGPT2Files), instead.
	gpt2 bool
}

// copies lists the files to copy as (source, name in DST).
func (t tokenizerFiles) copies() ([][2]string, error) {
	var out [][2]string
	switch {
	case (t.vocab == "") != (t.merges == ""):
		return nil, fmt.Errorf("ckpt convert --to-hf: --vocab-file and --merge-file go together (GPT-2's vocab.json and merges.txt)")
	case t.gpt2 && (t.vocab != "" || t.model != ""):
		return nil, fmt.Errorf("ckpt convert --to-hf: --gpt2-tokenizer writes GPT-2's own tokenizer files: drop --vocab-file, --merge-file and --tokenizer-model, or it")
	case t.vocab != "":
		out = append(out, [2]string{t.vocab, "vocab.json"}, [2]string{t.merges, "merges.txt"})
	}
	if t.model != "" {
		src := t.model
		if fi, err := os.Stat(src); err == nil && fi.IsDir() {
			src = filepath.Join(src, "tokenizer.json")
		}
		out = append(out, [2]string{src, "tokenizer.json"})
	}
	for _, c := range out {
		if _, err := os.Stat(c[0]); err != nil {
			return nil, fmt.Errorf("ckpt convert --to-hf: the tokenizer file %w", err)
		}
	}
	return out, nil
}

// readGotron reads the latest iteration of the gotron checkpoint src, in
// the distributed form or the whole-tensor one, as whole tensors and the
// model config its record describes.
func readGotron(src string) (*ckpt.Checkpoint, ckpt.Args, error) {
	var c *ckpt.Checkpoint
	r, err := ckpt.Open(src)
	if err == nil {
		defer r.Close()
		if c, err = ckpt.ToWhole(r); err != nil {
			return nil, ckpt.Args{}, err
		}
	} else if c, err = ckpt.Load(src); err != nil {
		return nil, ckpt.Args{}, fmt.Errorf("ckpt convert --to-hf: %s is not a gotron checkpoint: %w", src, err)
	}
	raw, err := json.Marshal(c.State.Args)
	var args ckpt.Args
	if err == nil {
		err = json.Unmarshal(raw, &args)
	}
	if err != nil {
		return nil, args, fmt.Errorf("ckpt convert --to-hf: %s: the checkpoint's record of its settings: %w", src, err)
	}
	if len(args.Ints) == 0 {
		return nil, args, fmt.Errorf("ckpt convert --to-hf: %s records no model settings (a checkpoint older than the record): its model cannot be described to Hugging Face", src)
	}
	return c, args, nil
}

// convertToHF writes the latest iteration of the gotron checkpoint src as
// a Hugging Face checkpoint of its family into dst, with the tokenizer
// files tok names.
func convertToHF(w io.Writer, src, dst string, tok tokenizerFiles) error {
	copies, err := tok.copies()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dst, hf.ConfigFile)); err == nil {
		return fmt.Errorf("ckpt convert --to-hf: %s holds a Hugging Face checkpoint already: pass a new or empty DST, or remove it", dst)
	}
	c, args, err := readGotron(src)
	if err != nil {
		return err
	}
	cfg, err := train.ModelOfCheckpoint(args)
	if err != nil {
		return fmt.Errorf("ckpt convert --to-hf: %s: %w", src, err)
	}
	m, err := hf.Export(cfg, c.Model)
	if err != nil {
		return fmt.Errorf("ckpt convert --to-hf: %s: %w", src, err)
	}
	if err := m.Write(dst); err != nil {
		return err
	}
	var names []string
	if tok.gpt2 {
		if err := tokenizer.WriteGPT2Files(dst); err != nil {
			return fmt.Errorf("ckpt convert --to-hf: GPT-2's tokenizer files: %w", err)
		}
		names = append(names, "vocab.json", "merges.txt")
	}
	for _, cp := range copies {
		if err := copyFile(cp[0], filepath.Join(dst, cp[1])); err != nil {
			return fmt.Errorf("ckpt convert --to-hf: %w", err)
		}
		names = append(names, cp[1])
	}
	fmt.Fprintf(w, "converted iteration %d of %s (%d layers, hidden %d) into a Hugging Face %s checkpoint in %s (%s, %s%s)\n",
		c.State.Iteration, src, cfg.NumLayers, cfg.HiddenSize, m.Family(), dst, hf.ConfigFile, hf.WeightsFile, withFiles(names))
	if len(names) == 0 {
		fmt.Fprintln(w, "no tokenizer files written: pass --vocab-file and --merge-file (GPT-2's) or --tokenizer-model (a tokenizer.json) to copy the run's beside the weights, or --gpt2-tokenizer for GPT-2's own (gotron's built-in GPT2BPETokenizer)")
	}
	return nil
}

func withFiles(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return ", " + strings.Join(names, ", ")
}

// convertFromHF writes the Hugging Face checkpoint src as a gotron
// checkpoint (iteration 0, one shard, no optimizer state) into dst, and
// says how to train from it.
func convertFromHF(w io.Writer, src, dst string) error {
	m, err := hf.Read(src)
	if err != nil {
		return fmt.Errorf("ckpt convert --from-hf: %w", err)
	}
	cfg, tensors, err := hf.Import(m)
	if err != nil {
		return fmt.Errorf("ckpt convert --from-hf: %s: %w", src, err)
	}
	if err := refuseExisting(dst, 0); err != nil {
		return err
	}
	raw, err := json.Marshal(train.ImportedArgs(cfg))
	if err != nil {
		return err
	}
	c := &ckpt.Checkpoint{Model: tensors}
	if err := json.Unmarshal(raw, &c.State.Args); err != nil {
		return err
	}
	if err := ckpt.FromWhole(dst, c, ckpt.Layout{World: 1, TP: 1, PP: 1, DP: 1}); err != nil {
		return err
	}
	fmt.Fprintf(w, "converted the Hugging Face %s checkpoint %s (%d layers, hidden %d, %d heads, vocabulary %d) into a gotron checkpoint in %s (iteration 0)\n",
		m.Family(), src, cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.VocabSize, dst)
	fmt.Fprintf(w, "train from it: gotron train --load %s --finetune --use-checkpoint-args --make-vocab-size-divisible-by 1 --seq-length S%s …\n", dst, tokenizerHint(src))
	return nil
}

// tokenizerHint is the tokenizer flags for the files a Hugging Face
// checkpoint directory holds.
func tokenizerHint(dir string) string {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	switch {
	case exists("vocab.json") && exists("merges.txt"):
		return fmt.Sprintf(" --tokenizer-type GPT2BPETokenizer --vocab-file %s --merge-file %s", filepath.Join(dir, "vocab.json"), filepath.Join(dir, "merges.txt"))
	case exists("tokenizer.json"):
		return fmt.Sprintf(" --tokenizer-type HuggingFaceTokenizer --tokenizer-model %s", filepath.Join(dir, "tokenizer.json"))
	}
	return ""
}

// copyFile copies src to dst.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
}
