package gpt

import (
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
