package gptdata

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// The fixtures of testdata/ come from tools/torchref/gpt_dataset_ref.py, an
// independent numpy implementation of the reference's index building.

// memSource is an in-memory Source.
type memSource struct {
	prefix  string
	lengths []int32
	starts  []int
	tokens  []int32
}

func newMemSource(prefix string, lengths, tokens []int32) *memSource {
	m := &memSource{prefix: prefix, lengths: lengths, tokens: tokens, starts: make([]int, len(lengths)+1)}
	for i, n := range lengths {
		m.starts[i+1] = m.starts[i] + int(n)
	}
	if m.starts[len(lengths)] != len(tokens) {
		panic("memSource: lengths do not add up to the tokens")
	}
	return m
}

func (m *memSource) Prefix() string           { return m.prefix }
func (m *memSource) SequenceLengths() []int32 { return m.lengths }
func (m *memSource) Tokens(dst []int32, seq, offset, n int) []int32 {
	if seq < 0 || seq >= len(m.lengths) || offset < 0 || n < 0 || offset+n > int(m.lengths[seq]) {
		panic(fmt.Sprintf("memSource: tokens [%d, %d+%d) of sequence %d", offset, offset, n, seq))
	}
	b := m.starts[seq] + offset
	return append(dst, m.tokens[b:b+n]...)
}

type corpusFile struct {
	SeqLength int `json:"seq_length"`
	EOD       int32
	Corpora   map[string]struct{ Lengths, Tokens []int32 }
}

type caseFile struct {
	Name               string
	DataPath           []string   `json:"data_path"`
	PerSplit           [][]string `json:"per_split"`
	Split              *string
	Seed               uint64
	ResetPositionIDs   bool `json:"reset_position_ids"`
	ResetAttentionMask bool `json:"reset_attention_mask"`
	EODMaskLoss        bool `json:"eod_mask_loss"`
	Pad                int32
	Run                *struct {
		TrainIters      int `json:"train_iters"`
		GlobalBatchSize int `json:"global_batch_size"`
		EvalInterval    int `json:"eval_interval"`
		EvalIters       int `json:"eval_iters"`
	}
	NumSamples [3]int `json:"num_samples"`
	Splits     []*splitFile
}

type splitFile struct {
	Len                int
	Kind               string
	Epochs             int
	SeparateFinalEpoch bool `json:"separate_final_epoch"`
	Tokens             [][]int32
	LossMask           [][]float32 `json:"loss_mask"`
	PositionIDs        [][]int32   `json:"position_ids"`
	Segments           [][]int32
	Files              []struct {
		Name, Sha256, DType string
		Shape               []int
	}
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// fixtures returns the corpus as Sources and the cases.
func fixtures(t testing.TB) (corpusFile, func(string) (Source, error), []caseFile) {
	var c corpusFile
	readJSON(t, "testdata/corpus.json", &c)
	srcs := map[string]*memSource{}
	for name, cp := range c.Corpora {
		srcs[name] = newMemSource(name, cp.Lengths, cp.Tokens)
	}
	open := func(prefix string) (Source, error) {
		if s, ok := srcs[prefix]; ok {
			return s, nil
		}
		return nil, fmt.Errorf("no dataset %s", prefix)
	}
	var cases []caseFile
	readJSON(t, "testdata/cases.json", &cases)
	if len(cases) < 5 {
		t.Fatalf("cases.json holds %d cases", len(cases))
	}
	return c, open, cases
}

// config returns the case's Config with cache directory dir.
func (c *caseFile) config(seq int, eod int32, dir string) Config {
	cfg := Config{SeqLength: seq, Seed: c.Seed, CachePath: dir, EOD: eod,
		ResetPositionIDs: c.ResetPositionIDs, ResetAttentionMask: c.ResetAttentionMask, EODMaskLoss: c.EODMaskLoss}
	if c.Split != nil {
		cfg.Split = *c.Split
	}
	if c.Pad != -1 {
		p := c.Pad
		cfg.PadID = &p
	}
	return cfg
}

// build builds the case's datasets with cache directory dir.
func (c *caseFile) build(t testing.TB, corpus corpusFile, open func(string) (Source, error), dir string) [3]Dataset {
	t.Helper()
	cfg := c.config(corpus.SeqLength, corpus.EOD, dir)
	var ds [3]Dataset
	var err error
	if c.PerSplit != nil {
		var blends [3]Blend
		for i, args := range c.PerSplit {
			if args != nil {
				if blends[i], err = ParseBlend(args); err != nil {
					t.Fatal(err)
				}
			}
		}
		ds, err = BuildPerSplit(cfg, blends, c.NumSamples, open)
	} else {
		blend, perr := ParseBlend(c.DataPath)
		if perr != nil {
			t.Fatal(perr)
		}
		ds, err = Build(cfg, blend, c.NumSamples, open)
	}
	if err != nil {
		t.Fatalf("case %s: %v", c.Name, err)
	}
	return ds
}
