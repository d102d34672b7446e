package plan

import (
	"context"
	"testing"
	"time"

	"github.com/gotron/gotron/config"
)

// deepSeekShaped is examples/deepseek-v3.sh's model, with 5 decoder layers
// (3 dense, 2 MoE) and a shorter sequence: multi-latent attention with
// YaRN, sigmoid routing with the expert bias and group-limited top-k, a
// shared expert, one MTP depth.
func deepSeekShaped() config.TransformerConfig {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.FFNHiddenSize, c.SeqLength, c.VocabSize = 5, 64, 4, 128, 32, 256
	c.MaxPositionEmbeddings = 32
	c.GatedLinearUnit, c.ActivationFunc, c.Normalization, c.QKLayernorm = true, config.SiLU, config.RMSNormType, true
	c.PositionEmbeddingType, c.ShareEmbeddingsAndOutputWeights, c.AddBiasLinear = config.RoPE, false, false
	c.HiddenDropout, c.AttentionDropout = 0, 0
	c.MLA = config.MLA{MultiLatentAttention: true, QLoRARank: 48, KVLoRARank: 32, QKHeadDim: 16, QKPosEmbHeadDim: 8, VHeadDim: 16,
		RopeType: "yarn", RotaryScalingFactor: 40, OriginalMaxPositionEmbeddings: 16, BetaFast: 32, BetaSlow: 1, MScale: 1, MScaleAllDim: 1}
	c.NumMoEExperts, c.MoELayerFreq, c.MoEFFNHiddenSize, c.MoERouterTopK = 16, []int{0, 0, 0, 1, 1}, 32, 4
	c.MoERouterNumGroups, c.MoERouterGroupTopK, c.MoERouterScoreFunction, c.MoERouterTopKScalingFactor = 4, 2, "sigmoid", 2.5
	c.MoERouterEnableExpertBias, c.MoERouterLoadBalancingType, c.MoEAuxLossCoeff = true, "seq_aux_loss", 1e-4
	c.MoESharedExpertIntermediateSize, c.MoEGroupedGEMM, c.MTPNumLayers = 32, true, 1
	return c
}

// TestMeasureActivationsMatchesFormula: for the DeepSeek-V3-shaped model
// (MoE, MLA and MTP) every layout `inspect memory` reports — one rank, TP 2
// + SP, with selective recompute, CP 2, TP 2 + SP + CP 2 — measures, on
// the tape, per layer and for the whole model at the end of forward, the
// bytes gotron's formula gives.
func TestMeasureActivationsMatchesFormula(t *testing.T) {
	c := deepSeekShaped()
	c.TensorModelParallelSize, c.ContextParallelSize = 2, 2
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := MeasureActivations(ctx, c, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Errorf("%d layouts, want 6 (MoE leaves out TP without SP and full recompute)", len(rows))
	}
	for _, r := range rows {
		if r.PerLayer != r.Estimate || r.EndOfForward != r.EstimateTotal || r.Korthikanti != 0 {
			t.Errorf("%s: measured %d per layer, %d at the end of forward; formula %d, %d (Korthikanti %g, want none)",
				r.Layout, r.PerLayer, r.EndOfForward, r.Estimate, r.EstimateTotal, r.Korthikanti)
		}
	}
}
