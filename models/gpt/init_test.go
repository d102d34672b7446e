package gpt

import (
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor/rng"
)

// TestNoInitialization: without perform_initialization every weight the
// model would draw is zero (a checkpoint fills them), and the constant
// ones (the norms' γ = 1) are as usual.
func TestNoInitialization(t *testing.T) {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = 2, 16, 2, 8, 32
	drawn, err := New(cfg, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.PerformInitialization = false
	m, err := New(cfg, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range m.Parameters() {
		var nonzero, differs bool
		for j, v := range p.Value.Data() {
			nonzero = nonzero || v != 0
			differs = differs || v != drawn.Parameters()[i].Value.Data()[j]
		}
		if nonzero && differs {
			t.Errorf("%s: neither zero nor the initialised model's constant", p.Name)
		}
	}
	if w := m.WordEmbeddings.Value.Data(); w[0] != 0 || drawn.WordEmbeddings.Value.Data()[0] == 0 {
		t.Errorf("the word embedding starts %v without initialisation, %v with", w[0], drawn.WordEmbeddings.Value.Data()[0])
	}
}

// TestXavierUniformInit: with init_method_xavier_uniform every weight the
// init methods draw — the embeddings, linear_qkv, linear_proj (unscaled),
// the MLP's, the untied output layer — lies in (−a, a), a = sqrt(6/(fan_in
// + fan_out)) of the whole weight (the real vocabulary for the
// embeddings), with the uniform's variance a²/3 to 5%; norms stay 1 and
// biases 0; and the draws are the normal init's positions in the stream
// (a different seed gives other weights, the same seed the same).
func TestXavierUniformInit(t *testing.T) {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = 2, 64, 4, 32, 500
	cfg.ShareEmbeddingsAndOutputWeights, cfg.InitMethodXavierUniform = false, true
	m, err := New(cfg, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	again, err := New(cfg, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	drawn := 0
	for i, p := range m.Parameters() {
		d, shape := p.Value.Data(), p.Value.Shape()
		if p.Value.Data()[0] != again.Parameters()[i].Value.Data()[0] {
			t.Errorf("%s differs between two models of the same seed", p.Name)
		}
		if len(shape) != 2 {
			continue // norms and biases: constants
		}
		rows := shape[0]
		if strings.Contains(p.Name, "word_embeddings") || p.Name == "output_layer.weight" {
			rows, d = cfg.VocabSize, d[:cfg.VocabSize*shape[1]] // the padding rows stay zero
		}
		a := math.Sqrt(6 / float64(rows+shape[1]))
		var sq float64
		for _, v := range d {
			if math.Abs(float64(v)) >= a {
				t.Fatalf("%s: %v outside (−%g, %g)", p.Name, v, a, a)
			}
			sq += float64(v) * float64(v)
		}
		if got, want := sq/float64(len(d)), a*a/3; math.Abs(got-want) > 0.05*want {
			t.Errorf("%s: variance %.4g, Xavier's uniform %.4g", p.Name, got, want)
		}
		drawn++
	}
	if drawn != 2+4*cfg.NumLayers+1 {
		t.Errorf("%d weights checked, want the 2 embeddings, 4 per layer and the output layer", drawn)
	}
	normal := cfg
	normal.InitMethodXavierUniform = false
	n, err := New(normal, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	// The same normal draws z: the Xavier value is a·erf(z/√2).
	z := n.Parameters()[0].Value.Data()[0] / float32(cfg.InitMethodStd)
	a := math.Sqrt(6 / float64(cfg.VocabSize+cfg.HiddenSize))
	if got, want := m.Parameters()[0].Value.Data()[0], float32(a*math.Erf(float64(z)/math.Sqrt2)); math.Abs(float64(got-want)) > 1e-6 {
		t.Errorf("the first embedding value %v, a·erf(z/√2) of the normal init's draw %v", got, want)
	}
}
