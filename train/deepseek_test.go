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

// TestDeepSeekV3BF16 trains the DeepSeek-V3-shaped model cut to 5 layers
// (3 dense, 2 MoE; MLA, one MTP depth) in bf16: on one rank its loss and
// depth-loss curves follow float32's to 2% without equalling them, and
// under PP 2 × VPP 2 with the depth on a stage of its own
// (Ettt|tt|m|L) and TP 2 + SP they follow bf16's one rank to 1e-4, the
// tolerance of bf16 layouts (TestMixedPrecisionLayouts).
func TestDeepSeekV3BF16(t *testing.T) {
	small := func(world int) Args {
		a := deepseekArgs(world)
		a.Model.NumLayers, a.Model.MoELayerFreq = 5, []int{0, 0, 0, 1, 1}
		a.GlobalBatchSize = 8
		return a
	}
	fp32 := mustRun(t, small(1))
	one := small(1)
	one.Model.BF16 = true
	bf16 := mustRun(t, one)
	same := true
	for i := range fp32.Losses {
		same = same && bf16.Losses[i] == fp32.Losses[i]
		if e := relErr(bf16.Losses[i], fp32.Losses[i]); e > 0.02 {
			t.Errorf("step %d: bf16 loss %.6f, float32 %.6f (relative %.3g > 2%%)", i+1, bf16.Losses[i], fp32.Losses[i], e)
		}
		if e := relErr(bf16.MTPLosses[i][0], fp32.MTPLosses[i][0]); e > 0.02 {
			t.Errorf("step %d: bf16 MTP loss %.6f, float32 %.6f (relative %.3g > 2%%)", i+1, bf16.MTPLosses[i][0], fp32.MTPLosses[i][0], e)
		}
	}
	if same {
		t.Error("the bf16 loss curve equals the float32 one bit for bit: the model does not run in bfloat16")
	}
	a := small(8)
	a.Model.BF16 = true
	a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 2, 2
	a.Model.PipelineModelParallelLayout = "Ettt|tt|m|L"
	a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
	got := mustRun(t, a)
	worst, worstFP32 := 0.0, 0.0
	for i := range bf16.Losses {
		worst = max(worst, relErr(got.Losses[i], bf16.Losses[i]), relErr(got.MTPLosses[i][0], bf16.MTPLosses[i][0]))
		worstFP32 = max(worstFP32, relErr(bf16.Losses[i], fp32.Losses[i]))
	}
	t.Logf("bf16 against float32 on one rank: %.2g; PP2 × VPP2 × TP2 against one rank in bf16: %.2g", worstFP32, worst)
	for i := range bf16.Losses {
		if e := relErr(got.Losses[i], bf16.Losses[i]); e > 1e-4 {
			t.Errorf("step %d: PP2 × VPP2 × TP2 loss %.8f, one rank %.8f (relative %.2g)", i+1, got.Losses[i], bf16.Losses[i], e)
		}
		if e := relErr(got.MTPLosses[i][0], bf16.MTPLosses[i][0]); e > 1e-4 {
			t.Errorf("step %d: PP2 × VPP2 × TP2 MTP loss %.8f, one rank %.8f (relative %.2g)", i+1, got.MTPLosses[i][0], bf16.MTPLosses[i][0], e)
		}
	}
}
