package train

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotron/gotron/data/gptdata"
	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
)

// withTokenizer builds the --tokenizer-type tokenizer (a.tok) and takes the
// vocabulary size from it when --vocab-size is unset; a larger tokenizer
// than --vocab-size is refused. With --sample it checks that the prompt
// encodes into the vocabulary.
func withTokenizer(a Args) (Args, error) {
	if a.Tokenizer.Type == "" || a.tok != nil {
		return a, a.checkPrompt()
	}
	o := a.Tokenizer
	if o.Type == tokenizer.TypeNull && o.VocabSize == 0 {
		o.VocabSize = a.Model.VocabSize
	}
	tok, err := tokenizer.New(o)
	if err != nil {
		return a, fmt.Errorf("invalid arguments: %w", err)
	}
	a.tok = tok
	switch v := a.Model.VocabSize; {
	case v == 0:
		a.Model.VocabSize = tok.VocabSize()
	case v < tok.VocabSize() && o.Type != tokenizer.TypeNull:
		return a, fmt.Errorf("invalid arguments: --vocab-size %d is smaller than the %s vocabulary (%d ids): raise --vocab-size or leave it unset", v, tok.Name(), tok.VocabSize())
	}
	return a, a.checkPrompt()
}

// checkPrompt checks, with --sample, that --sample-prompt encodes into at
// least one id of the vocabulary with the run's tokenizer (byte-level text
// without --tokenizer-type; Validate checks its bytes).
func (a Args) checkPrompt() error {
	if a.Sample <= 0 {
		return nil
	}
	if a.tok == nil {
		if a.SamplePrompt == "" {
			return fmt.Errorf("invalid arguments: --sample %d with an empty --sample-prompt: give the text the sample starts from", a.Sample)
		}
		return nil
	}
	var ids []int32
	if c, ok := a.tok.(tokenizer.CheckedEncoder); ok {
		var err error
		if ids, err = c.EncodeChecked(a.SamplePrompt); err != nil {
			return fmt.Errorf("invalid arguments: --sample-prompt %q: %v: give a prompt %s can encode", a.SamplePrompt, err, a.tok.Name())
		}
	} else {
		ids = a.tok.Encode(a.SamplePrompt)
	}
	if len(ids) == 0 {
		return fmt.Errorf("invalid arguments: --sample-prompt %q encodes to no tokens with %s: give the text the sample starts from", a.SamplePrompt, a.tok.Name())
	}
	for _, id := range ids {
		if v := a.Model.VocabSize; v > 0 && int(id) >= v {
			return fmt.Errorf("invalid arguments: --sample-prompt %q: id %d is outside the model's vocabulary [0, %d): raise --vocab-size or change the prompt", a.SamplePrompt, id, v)
		}
	}
	return nil
}

// checkDataVocab refuses indexed data without a tokenizer or a vocabulary
// size: the ids' range would be unknown (the reference always has a
// tokenizer).
func checkDataVocab(a Args) error {
	if a.indexedData() && a.Tokenizer.Type == "" && a.Model.VocabSize == 0 {
		return fmt.Errorf("invalid arguments: --data-path without --tokenizer-type: name the tokenizer that wrote the data (%s), which gives the vocabulary and the end-of-document id, or give --vocab-size for the ids alone",
			strings.Join(tokenizer.Types(), ", "))
	}
	return nil
}

// sampleCounts returns the samples the run reads from the train, valid and
// test datasets, as the reference asks its dataset builder for train and
// valid: train_iters·global_batch (or --train-samples) and
// (train_iters/eval_interval + 1)·eval_iters·global_batch
// (eval_iters·global_batch under --skip-train), so that their samples and
// order are the reference's. gotron's evaluations read the first
// eval_iters·global_batch of the valid samples, each time the same. The
// test split is not built: gotron evaluates none.
func (a Args) sampleCounts() ([3]int, error) {
	interval := a.EvalInterval
	if interval <= 0 {
		interval = math.MaxInt32
	}
	n, err := gptdata.NumSamples(a.TrainIters, a.GlobalBatchSize, interval, a.EvalIters)
	if err != nil {
		return n, fmt.Errorf("invalid arguments: %w", err)
	}
	if a.TrainSamples > 0 {
		n[0] = a.TrainSamples
	}
	if a.SkipTrain {
		n[1] = a.EvalIters * a.GlobalBatchSize // the reference's count under --skip-train
	}
	n[2] = 0 // gotron evaluates no test split (--split still keeps its documents out)
	return n, nil
}

// openIndexed builds Megatron's GPTDatasets over the --data-path blend (split
// by --split) or the per-split blends.
func openIndexed(a Args) (*datasets, error) {
	ds, err := buildIndexed(a)
	if err != nil {
		return nil, err
	}
	d := &datasets{vocab: a.Model.VocabSize, tok: a.tok}
	if ds[0] != nil {
		d.train = gptdata.NewBatches(ds[0])
	}
	if ds[1] != nil && a.EvalIters > 0 {
		d.valid = gptdata.NewBatches(ds[1])
	}
	d.desc = describeIndexed(a, ds)
	return d, nil
}

// TrainingSamples returns the token ids (seq_length + 1 each) of the first
// count training samples of the run a describes, in the order training
// consumes them, and the run's tokenizer (nil without --tokenizer-type).
// Without --train-iters or --train-samples the datasets are built for count
// training samples: the order of a run's first samples does not depend on
// its length while they come from its first pass over the data.
func TrainingSamples(a Args, count int) ([][]int32, tokenizer.Tokenizer, error) {
	if count < 1 {
		return nil, nil, fmt.Errorf("--count %d: must be at least 1", count)
	}
	if !a.indexedData() {
		return nil, nil, fmt.Errorf("--data-path (or --train-data-path) is required: the indexed datasets to read")
	}
	if errs := a.dataErrors(); len(errs) > 0 {
		return nil, nil, fmt.Errorf("invalid arguments: %s", errs[0])
	}
	if a.Model.SeqLength < 1 {
		return nil, nil, fmt.Errorf("--seq-length %d: must be at least 1", a.Model.SeqLength)
	}
	if a.GlobalBatchSize < 1 {
		a.GlobalBatchSize = 1
	}
	if a.TrainIters == 0 && a.TrainSamples == 0 {
		a.TrainSamples = count
	}
	var err error
	if a, err = withTokenizer(a); err != nil {
		return nil, nil, err
	}
	ds, err := buildIndexed(a)
	if err != nil {
		return nil, nil, err
	}
	if n := ds[0].Len(); count > n {
		return nil, nil, fmt.Errorf("--count %d: the training dataset has %d samples for this run: ask for fewer, or pass the run's --train-iters and --global-batch-size", count, n)
	}
	out := make([][]int32, count)
	for i := range out {
		out[i] = ds[0].Sample(i).Tokens
	}
	return out, a.tok, nil
}

// buildIndexed builds the train, valid and test datasets (nil: a split
// without documents or samples); a run that trains needs the train split.
func buildIndexed(a Args) ([3]gptdata.Dataset, error) {
	ds, counts, err := buildSplits(a)
	if err == nil && ds[0] == nil && counts[0] > 0 {
		err = fmt.Errorf("invalid arguments: --split %q leaves no documents for training: give the train split a share", a.Split)
	}
	return ds, err
}

// buildSplits builds the datasets and returns them with the samples asked
// of each.
func buildSplits(a Args) ([3]gptdata.Dataset, [3]int, error) {
	var ds [3]gptdata.Dataset
	cfg := gptdata.Config{
		SeqLength: a.Model.SeqLength, Seed: a.Seed, Split: a.Split, CachePath: a.DataCachePath,
		ResetPositionIDs: a.ResetPositionIDs, ResetAttentionMask: a.ResetAttentionMask, EODMaskLoss: a.EODMaskLoss,
	}
	if a.tok != nil {
		cfg.EOD = a.tok.EOD()
	}
	if a.Seed > math.MaxUint32 {
		return ds, [3]int{}, fmt.Errorf("invalid arguments: --seed %d with --data-path: the sample order uses numpy's generator, whose seed lies in [0, 2^32−1]: choose a smaller --seed", a.Seed)
	}
	counts, err := a.sampleCounts()
	if err != nil {
		return ds, counts, err
	}
	if len(a.DataPath) > 0 {
		blend, err := gptdata.ParseBlend(a.DataPath)
		if err != nil {
			return ds, counts, fmt.Errorf("invalid arguments: %w", err)
		}
		ds, err = gptdata.Build(cfg, blend, counts, opener("--data-path"))
		return ds, counts, err
	}
	var blends [3]gptdata.Blend
	for i, p := range [][]string{a.TrainDataPath, a.ValidDataPath, a.TestDataPath} {
		if len(p) == 0 {
			counts[i] = 0
			continue
		}
		if blends[i], err = gptdata.ParseBlend(p); err != nil {
			return ds, counts, fmt.Errorf("invalid arguments: --%s-data-path: %w", [3]string{"train", "valid", "test"}[i], err)
		}
	}
	ds, err = gptdata.BuildPerSplit(cfg, blends, counts, opener("--train-data-path/--valid-data-path"))
	return ds, counts, err
}

// describeIndexed names the data for the start-up line: the paths, the
// split and the samples of each split.
func describeIndexed(a Args, ds [3]gptdata.Dataset) string {
	var b strings.Builder
	if len(a.DataPath) > 0 {
		split := a.Split
		if split == "" {
			split = DefaultSplit
		}
		fmt.Fprintf(&b, "--data-path %s split %s", strings.Join(a.DataPath, " "), split)
	} else {
		b.WriteString("per-split data paths")
	}
	if a.tok != nil {
		fmt.Fprintf(&b, ", %s", a.tok.Name())
	}
	for i, name := range []string{"train", "valid"} {
		if ds[i] != nil {
			fmt.Fprintf(&b, ", %d %s samples", ds[i].Len(), name)
		}
	}
	if ds[1] == nil && a.EvalIters > 0 {
		b.WriteString(", no validation (the valid split holds no documents: give it a share with --split, or pass --valid-data-path)")
	}
	return b.String()
}

// opener returns the function that opens a dataset of the flag: the
// indexed dataset PREFIX.bin/.idx. The errors name the flag, and say what
// a user likely meant: the PREFIX_KEY_document that gotron preprocess
// wrote for an --output-prefix, the datasets inside a directory, or, for
// a text file or directory, the gotron preprocess command that makes one.
func opener(flag string) func(prefix string) (gptdata.Source, error) {
	return func(prefix string) (gptdata.Source, error) {
		ds, err := indexed.Open(prefix)
		if err == nil {
			return ds, nil
		}
		ext := filepath.Ext(prefix)
		if _, e := os.Stat(prefix + ".idx"); !errors.Is(e, fs.ErrNotExist) || ext == ".bin" || ext == ".idx" {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if _, e := os.Stat(prefix + "_text_document.idx"); e == nil {
			return nil, fmt.Errorf("%s %s: no %s.idx, but %s_text_document.idx exists: pass the dataset gotron preprocess wrote for --output-prefix %s, --data-path %s_text_document",
				flag, prefix, prefix, prefix, prefix, prefix)
		}
		st, e := os.Stat(prefix)
		if e != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if st.IsDir() {
			if found, _ := filepath.Glob(filepath.Join(prefix, "*.idx")); len(found) > 0 {
				for i := range found {
					found[i] = strings.TrimSuffix(found[i], ".idx")
				}
				if len(found) > 5 {
					found = append(found[:5], "…")
				}
				return nil, fmt.Errorf("%s %s: a directory, not a dataset prefix: it holds the indexed datasets %s: pass one of them (or a blend)", flag, prefix, strings.Join(found, ", "))
			}
		}
		kind := "file"
		if st.IsDir() {
			kind = "directory"
		}
		return nil, fmt.Errorf("%s %s: a text %s, not an indexed dataset (no %s.idx): tokenize it first, gotron preprocess --input %s --output-prefix PREFIX --tokenizer-type GPT2BPETokenizer --append-eod, then pass %s PREFIX_text_document; or train on its bytes with --text-data-path %s",
			flag, prefix, kind, prefix, prefix, flag, prefix)
	}
}
