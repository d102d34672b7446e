package source

import (
	"fmt"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/tokenizer"
)

// Sets are a run's training and validation data.
type Sets struct {
	Train, Valid data.Dataset // Valid nil: no validation data
	// Vocab is the data's vocabulary (the model's vocab_size must cover it).
	Vocab int
	// Desc describes the source for the start-up line.
	Desc string
	// Tok is the --tokenizer-type tokenizer (nil: byte-level text).
	Tok tokenizer.Tokenizer
}

// Text returns the tokenizer of samples: --tokenizer-type's, else bytes.
func (d *Sets) Text() tokenizer.Tokenizer {
	if d.Tok != nil {
		return d.Tok
	}
	tok, err := tokenizer.New(tokenizer.Options{Type: tokenizer.TypeByteLevel})
	if err != nil {
		panic(err) // the byte-level tokenizer needs no file
	}
	return tok
}

// mockValidSeedOffset separates the validation stream of mock data from the
// training stream.
const mockValidSeedOffset = 1_000_003

// Need is what a run asks of its data.
type Need struct {
	// SeqLength is the tokens of a sample (its labels one more); Vocab
	// the model's vocabulary (mock data draws ids below it; text data
	// must fit in it); Seed orders the samples.
	SeqLength, Vocab int
	Seed             uint64
	// Samples is the samples the run reads from the train, valid and test
	// splits of indexed data (GPTDataset's counts).
	Samples [3]int
	// Evaluates says the run evaluates (eval_iters > 0): indexed data
	// then opens its valid split.
	Evaluates bool
	// Tok is the run's tokenizer (nil: byte-level text), built from
	// Data.Tokenizer by the caller.
	Tok tokenizer.Tokenizer
}

// Open builds the datasets of the source a names, as n asks.
func Open(a Data, n Need) (*Sets, error) {
	seq := n.SeqLength
	if a.IndexedData() {
		return openIndexed(a, n)
	}
	if a.MockData {
		v := n.Vocab
		return &Sets{
			Train: data.MockDataset{Seed: n.Seed, Vocab: v, Seq: seq},
			Valid: data.MockDataset{Seed: n.Seed + mockValidSeedOffset, Vocab: v, Seq: seq},
			Vocab: v, Tok: n.Tok,
			Desc: fmt.Sprintf("mock data (vocabulary %d)", v),
		}, nil
	}
	var c *data.Corpus
	var err error
	if a.GoStdlibCorpus {
		c, err = data.GoRootCorpus()
	} else {
		c, err = data.LoadTextCorpus(a.TextDataPath, nil)
	}
	if err != nil {
		return nil, err
	}
	tr, va := c, (*data.Corpus)(nil)
	if a.SplitValid > 0 && len(c.Docs) > 1 {
		tr, va = c.Split(a.SplitValid, n.Seed)
	}
	train, err := data.NewTextDataset(tr, seq, n.Seed)
	if err != nil {
		return nil, err
	}
	if v := train.Vocab(); v > n.Vocab {
		return nil, fmt.Errorf("invalid arguments: --vocab-size %d is smaller than the data's vocabulary %d: raise --vocab-size (or leave it unset for byte-level text)", n.Vocab, v)
	}
	d := &Sets{Train: train, Vocab: train.Vocab(),
		Desc: fmt.Sprintf("%s: %d files, %d bytes for training, %d samples of %d tokens", c.Source, len(tr.Docs), tr.NumBytes(), train.NumSamples(), seq)}
	if va != nil {
		valid, err := data.NewTextDataset(va, seq, n.Seed+1)
		if err == nil {
			d.Valid = valid
			d.Desc += fmt.Sprintf("; %d held-out files (%d bytes) for validation", len(va.Docs), va.NumBytes())
		}
	}
	return d, nil
}
