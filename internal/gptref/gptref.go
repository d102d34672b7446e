// Package gptref reads the PyTorch reference fixture in testdata/gpt_ref
// (made by tools/torchref/gpt_ref.py) for the tests that compare with it.
//
// Regenerate the fixture with
//
//	/usr/bin/python3 tools/torchref/gpt_ref.py --out testdata/gpt_ref
package gptref

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Config is testdata/gpt_ref/config.json: the fixture's model, data and
// optimizer settings, keyed by Megatron's argument names.
type Config struct {
	NumLayers             int     `json:"num_layers"`
	HiddenSize            int     `json:"hidden_size"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	FFNHiddenSize         int     `json:"ffn_hidden_size"`
	SeqLength             int     `json:"seq_length"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	VocabSize             int     `json:"vocab_size"`
	MicroBatchSize        int     `json:"micro_batch_size"`
	GlobalBatchSize       int     `json:"global_batch_size"`
	Seed                  uint64  `json:"seed"`
	LR                    float64 `json:"lr"`
	AdamBeta1             float64 `json:"adam_beta1"`
	AdamBeta2             float64 `json:"adam_beta2"`
	AdamEps               float64 `json:"adam_eps"`
	WeightDecay           float64 `json:"weight_decay"`
	ClipGrad              float64 `json:"clip_grad"`
	TrainIters            int     `json:"train_iters"`
}

// Losses is testdata/gpt_ref/losses.json: each step's loss (before its
// update) and gradient norm (before clipping).
type Losses struct {
	Losses    []float64 `json:"losses"`
	GradNorms []float64 `json:"grad_norms"`
}

// Fixture is the whole fixture directory.
type Fixture struct {
	Dir    string
	Config Config
	Losses Losses
}

// Init and Grads return the paths of the initial weights and of the first
// step's gradients (safetensors, Megatron names).
func (f Fixture) Init() string  { return filepath.Join(f.Dir, "init.safetensors") }
func (f Fixture) Grads() string { return filepath.Join(f.Dir, "grads.safetensors") }

// Load reads the fixture in dir.
func Load(dir string) (Fixture, error) {
	f := Fixture{Dir: dir}
	if err := readJSON(filepath.Join(dir, "config.json"), &f.Config); err != nil {
		return f, err
	}
	if err := readJSON(filepath.Join(dir, "losses.json"), &f.Losses); err != nil {
		return f, err
	}
	return f, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
