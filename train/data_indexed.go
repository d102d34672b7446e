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
		return a, nil
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
	return a, nil
}

// sampleCounts returns the samples the run reads from the train, valid and
// test datasets, as the reference asks its dataset builder for them:
// train_iters·global_batch (or --train-samples), (train_iters/eval_interval
// + 1)·eval_iters·global_batch and eval_iters·global_batch. gotron's
// evaluations read the first eval_iters·global_batch of the valid samples,
// each time the same.
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
	return n, nil
}

// openIndexed builds Megatron's GPTDatasets over the --data-path blend (split
// by --split) or the per-split blends.
func openIndexed(a Args) (*datasets, error) {
	ds, counts, err := buildIndexed(a)
	if err != nil {
		return nil, err
	}
	if ds[0] == nil && counts[0] > 0 {
		return nil, fmt.Errorf("invalid arguments: --split %q leaves no documents for training: give the train split a share", a.Split)
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
	ds, _, err := buildIndexed(a)
	if err != nil {
		return nil, nil, err
	}
	if ds[0] == nil {
		return nil, nil, fmt.Errorf("--split %q leaves no documents for training: give the train split a share", a.Split)
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

// buildIndexed builds the train, valid and test datasets and returns them
// with the samples asked of each.
func buildIndexed(a Args) ([3]gptdata.Dataset, [3]int, error) {
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
		ds, err = gptdata.Build(cfg, blend, counts, openSource)
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
	ds, err = gptdata.BuildPerSplit(cfg, blends, counts, openSource)
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
	for i, name := range []string{"train", "valid", "test"} {
		if ds[i] != nil {
			fmt.Fprintf(&b, ", %d %s samples", ds[i].Len(), name)
		}
	}
	return b.String()
}

// openSource opens the indexed dataset PREFIX.bin/.idx. A prefix that is
// itself a text file or directory is a user who expected the text reader:
// the error says how to preprocess it.
func openSource(prefix string) (gptdata.Source, error) {
	ds, err := indexed.Open(prefix)
	if err == nil {
		return ds, nil
	}
	ext := filepath.Ext(prefix)
	if _, e := os.Stat(prefix + ".idx"); errors.Is(e, fs.ErrNotExist) && ext != ".bin" && ext != ".idx" {
		if st, e := os.Stat(prefix); e == nil {
			kind := "file"
			if st.IsDir() {
				kind = "directory"
			}
			return nil, fmt.Errorf("--data-path %s: a text %s, not an indexed dataset (no %s.idx): tokenize it first, gotron preprocess --input %s --output-prefix PREFIX --tokenizer-type GPT2BPETokenizer --append-eod, then pass --data-path PREFIX_text_document; or train on its bytes with --text-data-path %s",
				prefix, kind, prefix, prefix, prefix)
		}
	}
	return nil, fmt.Errorf("--data-path: %w", err)
}
