package train

import (
	"testing"

	"github.com/gotron/gotron/config"
)

// deepseekArgs is examples/deepseek-v3.sh's model at test widths on world
// ranks: 61 decoder layers, the first 3 dense and the rest MoE (sigmoid
// routing with the expert bias, 4 of 16 experts in 2 of 4 groups, scaled
// 2.5, a shared expert, the sequence-level loss), multi-latent attention
// with DeepSeek-V3's YaRN, one MTP depth, RMSNorm, SwiGLU, untied, no
// biases; 32 micro-batches of one 16-token row an iteration.
func deepseekArgs(world int) Args {
	a := DefaultArgs()
	a.WorldSize = world
	m := &a.Model
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads, m.FFNHiddenSize = 61, 32, 2, 64
	m.SeqLength, m.MaxPositionEmbeddings, m.VocabSize = 16, 16, 128
	m.HiddenDropout, m.AttentionDropout = 0, 0
	m.Normalization, m.ActivationFunc, m.GatedLinearUnit, m.QKLayernorm = config.RMSNormType, config.SiLU, true, true
	m.PositionEmbeddingType, m.ShareEmbeddingsAndOutputWeights, m.AddBiasLinear = config.RoPE, false, false
	m.MLA = config.MLA{MultiLatentAttention: true, QLoRARank: 24, KVLoRARank: 16, QKHeadDim: 8, QKPosEmbHeadDim: 8, VHeadDim: 8,
		RopeType: "yarn", RotaryScalingFactor: 40, OriginalMaxPositionEmbeddings: 8, BetaFast: 32, BetaSlow: 1, MScale: 1, MScaleAllDim: 1}
	m.NumMoEExperts, m.MoEFFNHiddenSize, m.MoESharedExpertIntermediateSize = 16, 16, 16
	m.MoELayerFreq = append([]int{0, 0, 0}, ones(58)...)
	m.MoERouterTopK, m.MoERouterNumGroups, m.MoERouterGroupTopK, m.MoERouterTopKScalingFactor = 4, 4, 2, 2.5
	m.MoERouterScoreFunction, m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = "sigmoid", true, 1e-3
	m.MoERouterLoadBalancingType, m.MoEAuxLossCoeff, m.MoEGroupedGEMM = "seq_aux_loss", 1e-4, true
	m.MTPNumLayers, m.MTPLossScalingFactor = 1, 0.1
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 1, 32, 10
	// (At lr 3e-3 one near-tie of the routing flips between the layouts'
	// last-bit differences by step 8, and the losses part by 4e-6; at
	// 1e-3 they stay within 1e-8.)
	a.LR, a.LRWarmupIters, a.WeightDecay = 1e-3, 2, 0.1
	a.MockData, a.EvalIters = true, 1
	return a
}

// ones is n ones.
func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// TestDeepSeekV3LayoutMatchesSingleRank trains the DeepSeek-V3-shaped
// model (deepseekArgs) under the seed's pipeline layout,
// Et*3|(tt|)*29,m|L on 16 pipeline ranks with 2 virtual stages each (the
// MTP depth on a stage of its own), and checks the 10-step loss curve,
// the validation loss and the MTP depth's losses against one rank's to
// 1e-6, and the first step's gathered gradients to 1e-5.
func TestDeepSeekV3LayoutMatchesSingleRank(t *testing.T) {
	wantLoss, wantMTP, wantGrads := mtpRun(t, deepseekArgs(1))
	a := deepseekArgs(16)
	a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 16, 2
	a.Model.PipelineModelParallelLayout = "Et*3|(tt|)*29,m|L"
	losses, mtp, grads := mtpRun(t, a)
	checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
	for i := range wantMTP {
		if e := relErr(mtp[i], wantMTP[i]); e > 1e-6 {
			t.Errorf("iteration %d: MTP loss %.9f, one rank %.9f (relative %.2g)", i+1, mtp[i], wantMTP[i], e)
		}
	}
}
