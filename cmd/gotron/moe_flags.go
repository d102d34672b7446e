package main

import (
	"github.com/spf13/pflag"

	"github.com/gotron/gotron/config"
)

// moeFlags are the mixture-of-experts flags (Megatron's spellings and
// defaults): bound to the config's MoE fields, but for --moe-layer-freq,
// read by apply.
type moeFlags struct {
	f *pflag.FlagSet
	m *config.TransformerConfig

	layerFreq string
}

// moeFlagNames are the flags that shape MoE layers, which a dense model
// (--num-experts unset) does not read.
var moeFlagNames = []string{
	"moe-layer-freq", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size", "moe-router-topk",
	"moe-router-score-function", "moe-router-pre-softmax", "moe-router-num-groups", "moe-router-group-topk",
	"moe-router-topk-scaling-factor", "moe-router-load-balancing-type", "moe-aux-loss-coeff", "moe-z-loss-coeff",
	"moe-router-enable-expert-bias", "moe-router-bias-update-rate", "moe-expert-capacity-factor",
	"moe-token-drop-policy", "moe-pad-expert-input-to-capacity", "moe-token-dispatcher-type", "moe-grouped-gemm",
}

// addMoEFlags adds the MoE flags.
func addMoEFlags(f *pflag.FlagSet, m *config.TransformerConfig) *moeFlags {
	mf := &moeFlags{f: f, m: m, layerFreq: config.FormatMoELayerFreq(m.MoELayerFreq)}
	f.IntVar(&m.NumMoEExperts, "num-experts", m.NumMoEExperts, "experts E of each MoE layer: the layers --moe-layer-freq selects replace their MLP with a router and E expert MLPs (0: a dense model)")
	f.StringVar(&mf.layerFreq, "moe-layer-freq", mf.layerFreq, `which layers are MoE: N (every N-th layer from layer 0) or a list of 0 (dense) and 1 (MoE) per layer, e.g. "[1,0,1,0]" or "([1]*3+[0]*1)*2"`)
	f.IntVar(&m.MoEFFNHiddenSize, "moe-ffn-hidden-size", m.MoEFFNHiddenSize, "each expert's MLP width (0: --ffn-hidden-size)")
	f.IntVar(&m.MoESharedExpertIntermediateSize, "moe-shared-expert-intermediate-size", m.MoESharedExpertIntermediateSize, "MLP width of the shared experts every token passes through beside its routed experts (0: none)")
	f.IntVar(&m.MoERouterTopK, "moe-router-topk", m.MoERouterTopK, "experts k each token is routed to")
	f.StringVar(&m.MoERouterScoreFunction, "moe-router-score-function", m.MoERouterScoreFunction, "the router's scores: softmax or sigmoid")
	f.BoolVar(&m.MoERouterPreSoftmax, "moe-router-pre-softmax", m.MoERouterPreSoftmax, "take the softmax over all experts before the top-k instead of over the k chosen")
	f.IntVar(&m.MoERouterNumGroups, "moe-router-num-groups", m.MoERouterNumGroups, "group-limited routing: the experts fall into this many groups (0: no groups)")
	f.IntVar(&m.MoERouterGroupTopK, "moe-router-group-topk", m.MoERouterGroupTopK, "group-limited routing: each token's experts come from its best this many groups")
	f.Float64Var(&m.MoERouterTopKScalingFactor, "moe-router-topk-scaling-factor", m.MoERouterTopKScalingFactor, "scale the routing probabilities by this (0: not scaled)")
	f.StringVar(&m.MoERouterLoadBalancingType, "moe-router-load-balancing-type", m.MoERouterLoadBalancingType, "the load-balancing loss: aux_loss (over the batch), seq_aux_loss (per sequence) or none")
	f.Float64Var(&m.MoEAuxLossCoeff, "moe-aux-loss-coeff", m.MoEAuxLossCoeff, "weight of the load-balancing loss (0: none)")
	f.Float64Var(&m.MoEZLossCoeff, "moe-z-loss-coeff", m.MoEZLossCoeff, "weight of the router's z loss (0: none)")
	f.BoolVar(&m.MoERouterEnableExpertBias, "moe-router-enable-expert-bias", m.MoERouterEnableExpertBias, "aux-loss-free balancing: route by the sigmoid scores plus a per-expert bias moved toward balance after every step")
	f.Float64Var(&m.MoERouterBiasUpdateRate, "moe-router-bias-update-rate", m.MoERouterBiasUpdateRate, "the step of the expert bias under --moe-router-enable-expert-bias")
	f.Float64Var(&m.MoEExpertCapacityFactor, "moe-expert-capacity-factor", m.MoEExpertCapacityFactor, "cap each expert's tokens at this × its even share and drop the rest (0: no capacity, nothing dropped)")
	f.StringVar(&m.MoETokenDropPolicy, "moe-token-drop-policy", m.MoETokenDropPolicy, "under a capacity, which tokens an expert keeps: probs (the most probable) or position (the first)")
	f.BoolVar(&m.MoEPadExpertInputToCapacity, "moe-pad-expert-input-to-capacity", m.MoEPadExpertInputToCapacity, "under a capacity, pad every expert's tokens up to it")
	f.StringVar(&m.MoETokenDispatcherType, "moe-token-dispatcher-type", m.MoETokenDispatcherType, "how tokens reach their experts' expert-parallel ranks: allgather or alltoall (the numbers do not change)")
	f.BoolVar(&m.MoEGroupedGEMM, "moe-grouped-gemm", m.MoEGroupedGEMM, "run a rank's experts as one grouped operation over their token slices instead of one MLP after another (the numbers do not change)")
	return mf
}

// apply reads --moe-layer-freq into the config and refuses, each naming
// the flags and the fix, what would be silently ignored: an MoE flag
// without --num-experts, --moe-router-bias-update-rate without
// --moe-router-enable-expert-bias, --moe-token-drop-policy without
// --moe-expert-capacity-factor; and a one-value pattern ("[1]"), which
// the config would read as a frequency, for a model of more than one
// layer. The values themselves are checked by the config's validation.
func (mf *moeFlags) apply(add func(format string, a ...any)) {
	f, m := mf.f, mf.m
	if f.Changed("moe-layer-freq") {
		freq, pattern, err := config.ParseMoELayerFreq(mf.layerFreq)
		switch {
		case err != nil:
			add(`%v: set --moe-layer-freq to N or to a list of 0 (dense) and 1 (MoE) per layer such as "[1,0,1,0]" or "([1]*3+[0]*1)*2"`, err)
		case pattern && len(freq) == 1 && m.NumLayers != 1:
			add("--moe-layer-freq %s lists 1 value: a pattern needs one 0 (dense) or 1 (MoE) per layer, --num-layers %d of them; for every layer MoE give --moe-layer-freq 1", mf.layerFreq, m.NumLayers)
		case pattern && len(freq) == 1 && freq[0] != 1:
			add("--moe-layer-freq %s marks the one layer with %d: a MoE model of one layer has the pattern [1]; give it, or drop --num-experts for a dense model", mf.layerFreq, freq[0])
		default:
			m.MoELayerFreq = freq
		}
	}
	if m.NumMoEExperts == 0 {
		for _, n := range moeFlagNames {
			if f.Changed(n) {
				add("--%s shapes MoE layers, and --num-experts is unset (a dense model): add --num-experts, or drop --%s", n, n)
			}
		}
		return
	}
	if f.Changed("moe-router-bias-update-rate") && !m.MoERouterEnableExpertBias {
		add("--moe-router-bias-update-rate takes effect only with --moe-router-enable-expert-bias: add it, or drop --moe-router-bias-update-rate")
	}
	if f.Changed("moe-token-drop-policy") && m.MoEExpertCapacityFactor == 0 {
		add("--moe-token-drop-policy chooses the tokens an expert drops beyond its capacity, and --moe-expert-capacity-factor is unset (nothing is dropped): set it, or drop --moe-token-drop-policy")
	}
}
