package train

import (
	"fmt"
	"math"
	"strings"

	"github.com/gotron/gotron/data/gptdata"
	"github.com/gotron/gotron/data/source"
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
	if a.IndexedData() && a.Tokenizer.Type == "" && a.Model.VocabSize == 0 {
		return fmt.Errorf("invalid arguments: --data-path without --tokenizer-type: name the tokenizer that wrote the data (%s), which gives the vocabulary and the end-of-document id, or give --vocab-size for the ids alone",
			strings.Join(tokenizer.Types(), ", "))
	}
	return nil
}

// sampleCounts returns the samples the run reads from the train, valid and
// test datasets, as the reference asks its dataset builder for train and
// valid: train_iters·global_batch (or --train-samples; the sum of the
// batches of a step schedule's train_iters) and
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
	} else if a.stepSchedule() != nil {
		// The samples the schedule's batches consume (the reference sizes
		// the dataset at train_iters × micro × dp under a schedule, fewer
		// than its iterations read).
		n[0] = int(a.trainSamplesNeeded())
	}
	if a.SkipTrain {
		n[1] = a.EvalIters * a.GlobalBatchSize // the reference's count under --skip-train
	}
	n[2] = 0 // gotron evaluates no test split (--split still keeps its documents out)
	return n, nil
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
	if !a.IndexedData() {
		return nil, nil, fmt.Errorf("--data-path (or --train-data-path) is required: the indexed datasets to read")
	}
	if errs := a.Data.DataErrors(a.SkipTrain); len(errs) > 0 {
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
	need, err := a.dataNeed()
	if err != nil {
		return nil, nil, err
	}
	ds, err := source.BuildIndexed(a.Data, need)
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

// dataNeed is what the run asks of its data (source.Need); the samples of
// each split count only for indexed data.
func (a Args) dataNeed() (source.Need, error) {
	n := source.Need{SeqLength: a.Model.SeqLength, Vocab: a.Model.VocabSize, Seed: a.Seed, Evaluates: a.EvalIters > 0, Tok: a.tok}
	if !a.IndexedData() || a.Seed > math.MaxUint32 {
		return n, nil // the seed is refused by source, which owns the rule
	}
	var err error
	n.Samples, err = a.sampleCounts()
	return n, err
}

// openData builds the datasets the arguments name.
func openData(a Args) (*source.Sets, error) {
	n, err := a.dataNeed()
	if err != nil {
		return nil, err
	}
	d, err := source.Open(a.Data, n)
	if err == nil && a.dataNote != "" {
		d.Desc += "; " + a.dataNote
	}
	return d, err
}
