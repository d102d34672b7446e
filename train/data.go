package train

import (
	"fmt"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/tokenizer"
)

// datasets holds the training and validation data.
type datasets struct {
	train, valid data.Dataset
	// vocab is the data's vocabulary (the model's vocab_size must cover it).
	vocab int
	// desc describes the source for the log.
	desc string
	// tok is the --tokenizer-type tokenizer (nil: byte-level text).
	tok tokenizer.Tokenizer
}

// text returns the tokenizer of samples: --tokenizer-type's, else bytes.
func (d *datasets) text() tokenizer.Tokenizer {
	if d.tok != nil {
		return d.tok
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

// openData builds the datasets the arguments name.
func openData(a Args) (*datasets, error) {
	d, err := openSources(a)
	if err == nil && a.dataNote != "" {
		d.desc += "; " + a.dataNote
	}
	return d, err
}

// openSources builds the datasets of the data source.
func openSources(a Args) (*datasets, error) {
	seq := a.Model.SeqLength
	if a.indexedData() {
		return openIndexed(a)
	}
	if a.MockData {
		v := a.Model.VocabSize
		return &datasets{
			train: data.MockDataset{Seed: a.Seed, Vocab: v, Seq: seq},
			valid: data.MockDataset{Seed: a.Seed + mockValidSeedOffset, Vocab: v, Seq: seq},
			vocab: v, tok: a.tok,
			desc: fmt.Sprintf("mock data (vocabulary %d)", v),
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
		tr, va = c.Split(a.SplitValid, a.Seed)
	}
	train, err := data.NewTextDataset(tr, seq, a.Seed)
	if err != nil {
		return nil, err
	}
	if v := train.Vocab(); v > a.Model.VocabSize {
		return nil, fmt.Errorf("invalid arguments: --vocab-size %d is smaller than the data's vocabulary %d: raise --vocab-size (or leave it unset for byte-level text)", a.Model.VocabSize, v)
	}
	d := &datasets{train: train, vocab: train.Vocab(),
		desc: fmt.Sprintf("%s: %d files, %d bytes for training, %d samples of %d tokens", c.Source, len(tr.Docs), tr.NumBytes(), train.NumSamples(), seq)}
	if va != nil {
		valid, err := data.NewTextDataset(va, seq, a.Seed+1)
		if err == nil {
			d.valid = valid
			d.desc += fmt.Sprintf("; %d held-out files (%d bytes) for validation", len(va.Docs), va.NumBytes())
		}
	}
	return d, nil
}
