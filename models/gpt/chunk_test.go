package gpt

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor/rng"
)

func chunkTestConfig() config.TransformerConfig {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads = 5, 16, 4
	c.SeqLength, c.VocabSize = 8, 50
	c.HiddenDropout, c.AttentionDropout = 0, 0
	return c
}

// presetNames are the model shapes the chunk tests cover: the GPT-2 shape
// ("") and the optionPresets.
var presetNames = []string{"", "llama", "qknorm", "misc", "mtp"}

// presetConfig is chunkTestConfig with the named preset's options.
func presetConfig(name string) config.TransformerConfig {
	c := chunkTestConfig()
	if name != "" {
		optionPresets[name](&c)
	}
	return c
}

// TestChunksHoldTheWholeModelsWeights builds the model as chunks of every
// split and checks each parameter is bitwise the whole model's.
func TestChunksHoldTheWholeModelsWeights(t *testing.T) {
	for _, preset := range presetNames {
		t.Run("preset="+preset, func(t *testing.T) { testChunksHoldWeights(t, presetConfig(preset)) })
	}
}

func testChunksHoldWeights(t *testing.T, cfg config.TransformerConfig) {
	whole, err := New(cfg, rng.New(7))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whole.Shapes(), ParameterShapes(cfg); !maps.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Fatalf("ParameterShapes = %v, the whole model has %v", want, got)
	}
	held := 0
	for _, p := range whole.Parameters() {
		held += p.Value.Len()
	}
	held -= (cfg.PaddedVocabSize() - cfg.VocabSize) * cfg.HiddenSize // the padding rows
	if !cfg.ShareEmbeddingsAndOutputWeights {
		held -= (cfg.PaddedVocabSize() - cfg.VocabSize) * cfg.HiddenSize // the output layer's
	}
	if n := NumParameters(cfg); n != held {
		t.Fatalf("NumParameters = %d, the whole model holds %d real values", n, held)
	}
	for _, spec := range []ChunkSpec{
		{PreProcess: true, NumLayers: 2},
		{LayerOffset: 2, NumLayers: 1},
		{LayerOffset: 3, NumLayers: 2, PostProcess: true},
		{LayerOffset: 5, NumLayers: 0, PostProcess: true},
		{PreProcess: true, NumLayers: 0},
		{LayerOffset: 4, NumLayers: 0},
	} {
		spec.MTP = spec.PostProcess && cfg.MTPNumLayers > 0 // the depths sit with the loss
		c, err := NewChunk(cfg, rng.New(7), nil, spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range c.Parameters() {
			w := whole.Parameter(p.Name)
			if w == nil {
				t.Fatalf("%+v: the chunk has %s, the whole model does not", spec, p.Name)
			}
			numtest.SameBits(t, fmt.Sprintf("%+v: %s", spec, p.Name), p.Value.Data(), w.Value.Data())
		}
		want := 12 * spec.NumLayers // 12 tensors per layer of the GPT-2 shape
		if spec.PreProcess {
			want += 2
		} else if spec.PostProcess {
			want++ // the shared word embedding
		}
		if spec.PostProcess {
			want += 2
		}
		if !cfg.ShareEmbeddingsAndOutputWeights || !cfg.LearnedPositions() || cfg.RMSNorm() || !cfg.AddBiasLinear || cfg.QKLayernorm || spec.MTP {
			specs, err := ChunkParamSpecs(cfg, 1, spec) // the options change the count
			if err != nil {
				t.Fatal(err)
			}
			want = len(specs)
		}
		if len(c.Parameters()) != want {
			t.Errorf("%+v: %d parameters, want %d", spec, len(c.Parameters()), want)
		}
		for i := range spec.NumLayers {
			name := fmt.Sprintf("decoder.layers.%d.self_attention.linear_qkv.weight", spec.LayerOffset+i)
			if c.Parameter(name) == nil {
				t.Errorf("%+v: no %s", spec, name)
			}
		}
	}
	if _, err := NewChunk(cfg, rng.New(7), nil, ChunkSpec{LayerOffset: 4, NumLayers: 2}); err == nil {
		t.Error("a chunk past num_layers was built")
	}
}

// TestChunkedForwardMatchesWhole runs three chunks in sequence, each fed
// by the previous one's output, and checks the losses and every gradient
// bitwise against the whole model.
func TestChunkedForwardMatchesWhole(t *testing.T) {
	for _, preset := range presetNames {
		t.Run("preset="+preset, func(t *testing.T) { testChunkedForward(t, presetConfig(preset)) })
	}
}

func testChunkedForward(t *testing.T, cfg config.TransformerConfig) {
	b, s := 2, cfg.SeqLength
	ids, labels := make([]int32, b*s), make([]int32, b*s)
	for i := range ids {
		ids[i], labels[i] = int32(i*7%cfg.VocabSize), int32(i*3%cfg.VocabSize)
	}
	tape := autograd.NewTape(t.Context())
	whole, _ := New(cfg, rng.New(7))
	wl, err := whole.Forward(tape, ids, labels, b, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := autograd.Backward(tape, autograd.Sum(tape, wl), nil); err != nil {
		t.Fatal(err)
	}
	specs := []ChunkSpec{{PreProcess: true, NumLayers: 2}, {LayerOffset: 2, NumLayers: 1}, {LayerOffset: 3, NumLayers: 2, PostProcess: true}}
	var chunks []*Model
	var outs, ins []*autograd.Var
	var x *autograd.Var
	for _, spec := range specs {
		c, _ := NewChunk(cfg, rng.New(7), nil, spec)
		chunks = append(chunks, c)
		var in *autograd.Var
		if x != nil {
			in = autograd.NewLeaf(x.Value.Clone(), "input", true)
			c.SetInputTensor(in)
		}
		ins = append(ins, in)
		if x, err = c.Forward(tape, ids, labels, b, s, nil); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, x)
	}
	numtest.SameBits(t, "chunked losses", x.Value.Data(), wl.Value.Data())
	// Backward from the last chunk to the first, handing each input's
	// gradient to the previous chunk's output.
	var g *autograd.Var
	for i := len(chunks) - 1; i >= 0; i-- {
		out := outs[i]
		if i == len(chunks)-1 {
			out = autograd.Sum(tape, out)
			err = autograd.Backward(tape, out, nil)
		} else {
			err = autograd.Backward(tape, out, g.Grad)
		}
		if err != nil {
			t.Fatal(err)
		}
		g = ins[i]
	}
	for _, c := range chunks {
		for _, p := range c.Parameters() {
			if p.Name == "embedding.word_embeddings.weight" && cfg.ShareEmbeddingsAndOutputWeights {
				continue // split between the first and last chunk's copies
			}
			numtest.SameBits(t, "gradient of "+p.Name, p.Grad.Data(), whole.Parameter(p.Name).Grad.Data())
		}
	}
	// The tied embedding's gradient is the sum of the two copies'.
	if cfg.ShareEmbeddingsAndOutputWeights {
		first, last := chunks[0].WordEmbeddings.Grad.Data(), chunks[2].WordEmbeddings.Grad.Data()
		sum := make([]float32, len(first))
		for i := range sum {
			sum[i] = first[i] + last[i]
		}
		if d := numtest.RelNorm(sum, whole.WordEmbeddings.Grad.Data()); d > 1e-6 {
			t.Errorf("the summed word-embedding gradient differs from the whole model's by %g", d)
		}
	} else {
		if chunks[2].WordEmbeddings != nil {
			t.Error("the last chunk of an untied model holds a word embedding")
		}
		numtest.SameBits(t, "untied word-embedding gradient", chunks[0].WordEmbeddings.Grad.Data(), whole.WordEmbeddings.Grad.Data())
	}
	if _, err := chunks[1].Forward(tape, ids, labels, b, s, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := NewChunk(cfg, rng.New(7), nil, specs[1])
	if _, err := c.Forward(tape, ids, labels, b, s, nil); err == nil {
		t.Error("a chunk without embedding or input ran")
	}
}
