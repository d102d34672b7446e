package gpt

import (
	"testing"

	"github.com/gotron/gotron/config"
)

// TestTrainingFLOPs: the GPT-2 shape gives 6·T·(12·L·h² + V·h) +
// 12·L·h·s·T exactly; a MoE layer counts k of its experts and the router.
func TestTrainingFLOPs(t *testing.T) {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.SeqLength, c.VocabSize = 6, 512, 8, 512, 8192
	T, L, h, s, V := 2048.0, 6.0, 512.0, 512.0, 8192.0
	if got, want := TrainingFLOPs(c, 2048), 6*T*(12*L*h*h+V*h)+12*L*h*s*T; got != want {
		t.Errorf("GPT-2 shape: %g, want %g", got, want)
	}
	m := c
	m.NumMoEExperts, m.MoERouterTopK, m.MoEFFNHiddenSize, m.MoELayerFreq = 8, 2, 1024, []int{2}
	// Layers 0, 2, 4 are MoE: each swaps its 8h² MLP for 2 experts of
	// 2·h·1024 and the router's 8·h.
	moe := 6 * T * 3 * (2*2*h*1024 + 8*h - 8*h*h)
	if got, want := TrainingFLOPs(m, 2048), 6*T*(12*L*h*h+V*h)+12*L*h*s*T+moe; got != want {
		t.Errorf("MoE every other layer: %g, want %g", got, want)
	}
	// Without --moe-ffn-hidden-size an expert is --ffn-hidden-size wide
	// (4h here), as in Megatron.
	m.MoEFFNHiddenSize = 0
	moe = 6 * T * 3 * (2*2*h*4*h + 8*h - 8*h*h)
	if got, want := TrainingFLOPs(m, 2048), 6*T*(12*L*h*h+V*h)+12*L*h*s*T+moe; got != want {
		t.Errorf("MoE experts of the MLP's width: %g, want %g", got, want)
	}
}

// TestTrainingFLOPsMLAAndMTP: with multi-latent attention and MTP depths
// (dense layers), the weights counted are every GEMM weight of the model
// (its 2-d tensors but the embedding; the tied output layer once per
// prediction), and the attention square's per-head width is q_d + v_d.
func TestTrainingFLOPsMLAAndMTP(t *testing.T) {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.SeqLength, c.VocabSize = 3, 64, 4, 32, 512
	c.PositionEmbeddingType, c.MTPNumLayers = config.RoPE, 2
	c.MLA = config.MLA{MultiLatentAttention: true, QLoRARank: 24, KVLoRARank: 16, QKHeadDim: 8, QKPosEmbHeadDim: 4, VHeadDim: 12, RopeType: "rope"}
	var weights float64
	for _, p := range paramList(c, 1, WholeModel(c), false) {
		if len(p.Shape) == 2 && p.Name != "embedding.word_embeddings.weight" {
			weights += float64(p.Numel())
		}
	}
	T, h, s, V, n := 100.0, 64.0, 32.0, 512.0, 4.0
	want := 6*T*(weights+3*V*h) + 6*(3+2)*n*(12+12)*s*T
	if got := TrainingFLOPs(c, 100); got != want {
		t.Errorf("MLA with 2 MTP depths: %g FLOPs, want %g", got, want)
	}
}
