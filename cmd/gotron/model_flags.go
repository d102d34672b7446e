package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gotron/gotron/config"
)

// modelFlags are the model-option flags (Megatron's pretrain_gpt.py
// spellings) whose effect on the config depends on other flags, as
// Megatron's training layer derives the config from its arguments: read
// into the config by apply once the flags are parsed. The others are
// bound to the config's fields directly.
type modelFlags struct {
	f *pflag.FlagSet
	m *config.TransformerConfig

	swiglu, squaredReLU, openAIGELU                    bool
	noBiasGELUFusion, noBiasSwiGLUFusion, noBiasLinear bool
	groupQueryAttention                                bool
	numQueryGroups                                     int
	useRotary, noPositionEmbedding, untie              bool
	noInitialization, noGradAccumulationFusion         bool
	moe                                                *moeFlags
}

// addModelOptionFlags adds the flags of the model options beyond the
// GPT-2 shape: normalisation, MLP activation and biases, grouped-query
// attention, position embedding, untied output layer, and the MoE flags.
func addModelOptionFlags(f *pflag.FlagSet, m *config.TransformerConfig) *modelFlags {
	mf := &modelFlags{f: f, m: m}
	f.StringVar(&m.Normalization, "normalization", m.Normalization, "the layer norms: LayerNorm (default) or RMSNorm")
	f.Float32Var(&m.LayernormEpsilon, "norm-epsilon", m.LayernormEpsilon, "ε of every LayerNorm/RMSNorm (the same setting as --layernorm-epsilon)")
	f.BoolVar(&m.LayernormZeroCenteredGamma, "apply-layernorm-1p", m.LayernormZeroCenteredGamma, "store every norm weight as γ−1, initialised to 0 (the norm scales by 1 + weight)")
	f.BoolVar(&m.QKLayernorm, "qk-layernorm", m.QKLayernorm, "normalise each query and key head (with --normalization) before attention")
	f.BoolVar(&mf.swiglu, "swiglu", false, "SwiGLU MLP: silu(gate)·up, linear_fc1 giving both (--ffn-hidden-size default 4·h·2/3, rounded down to a multiple of 64)")
	f.BoolVar(&mf.squaredReLU, "squared-relu", false, "MLP activation max(x, 0)² instead of GELU")
	f.BoolVar(&mf.openAIGELU, "openai-gelu", false, "MLP activation GELU in its tanh approximation, always")
	f.BoolVar(&mf.noBiasGELUFusion, "no-bias-gelu-fusion", false, "compute GELU exactly (erf) instead of the fused bias-GELU's tanh approximation")
	f.BoolVar(&mf.noBiasSwiGLUFusion, "no-bias-swiglu-fusion", false, "with --swiglu, unfused bias and SwiGLU (accepted for Megatron's scripts: the numbers do not change)")
	f.BoolVar(&mf.noBiasLinear, "disable-bias-linear", false, "no bias in any linear layer (linear_qkv keeps one with --add-qkv-bias); the default GELU is then exact (erf), as unfused")
	f.BoolVar(&m.AddQKVBias, "add-qkv-bias", m.AddQKVBias, "give linear_qkv a bias even with --disable-bias-linear")
	f.BoolVar(&mf.groupQueryAttention, "group-query-attention", false, "grouped-query attention: --num-query-groups key/value heads, each shared by heads/groups query heads")
	f.IntVar(&mf.numQueryGroups, "num-query-groups", 1, "key/value head groups under --group-query-attention")
	f.IntVar(&m.KVChannels, "kv-channels", m.KVChannels, "head dimension (0: hidden size / attention heads)")
	f.StringVar(&m.PositionEmbeddingType, "position-embedding-type", m.PositionEmbeddingType, "learned_absolute (default), rope (rotary, on queries and keys) or none")
	f.IntVar(&m.RotaryBase, "rotary-base", m.RotaryBase, "RoPE's base θ")
	f.Float64Var(&m.RotaryPercent, "rotary-percent", m.RotaryPercent, "the fraction of each head's channels RoPE rotates, in (0, 1]")
	f.BoolVar(&m.RotaryInterleaved, "rotary-interleaved", m.RotaryInterleaved, "RoPE rotates channel pairs (2i, 2i+1) instead of (i, i + d/2)")
	f.BoolVar(&mf.useRotary, "use-rotary-position-embeddings", false, "the same as --position-embedding-type rope (deprecated spelling)")
	f.BoolVar(&mf.noPositionEmbedding, "no-position-embedding", false, "deprecated; accepted with rope, where it changes nothing: use --position-embedding-type")
	f.BoolVar(&mf.untie, "untie-embeddings-and-output-weights", false, "give the output layer its own weight instead of the word embedding's")
	f.BoolVar(&m.ApplyResidualConnectionPostLayernorm, "apply-residual-connection-post-layernorm", m.ApplyResidualConnectionPostLayernorm, "take each residual from the layer norm's output instead of its input (the original BERT order)")
	f.BoolVar(&mf.noInitialization, "no-initialization", false, "draw no initial weights (with --load, whose checkpoint sets every one): a faster start for a large model")
	f.BoolVar(&mf.noGradAccumulationFusion, "no-gradient-accumulation-fusion", false, "compute each linear layer's weight gradient apart and then add it to the main gradient (rounded to the parameters' type first under --bf16 or --fp16), instead of accumulating it in the GEMM")
	f.IntVar(&m.MTPNumLayers, "mtp-num-layers", m.MTPNumLayers, "multi-token prediction: this many depths after the decoder, each predicting one token further (DeepSeek-V3's MTP), trained with the shared embedding and output layer")
	f.Float64Var(&m.MTPLossScalingFactor, "mtp-loss-scaling-factor", m.MTPLossScalingFactor, "the weight of the MTP depths' mean loss in the objective")
	addMLAFlags(f, &m.MLA)
	mf.moe = addMoEFlags(f, m)
	return mf
}

// apply reads the flags that depend on one another into the config, as
// Megatron's training layer does: --swiglu is silu with a gated linear
// unit, and the bias-activation fusion follows --no-bias-swiglu-fusion
// with it, else --no-bias-gelu-fusion and --disable-bias-linear;
// --group-query-attention takes --num-query-groups (1 unless given). It
// refuses, each naming the flags and the fix, what the reference refuses
// (--swiglu with --squared-relu; --no-position-embedding without rope)
// and what it silently ignores or overrides (--num-query-groups without
// --group-query-attention, the RoPE flags without rope, two activations,
// two position embeddings, both spellings of ε), and reads the MoE flags
// (moeFlags.apply).
func (mf *modelFlags) apply() error {
	f, m := mf.f, mf.m
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	if f.Changed("norm-epsilon") && f.Changed("layernorm-epsilon") {
		add("--norm-epsilon and --layernorm-epsilon set the same ε: give one")
	}

	var acts []string
	for _, a := range []struct {
		flag string
		on   bool
	}{{"--swiglu", mf.swiglu}, {"--squared-relu", mf.squaredReLU}, {"--openai-gelu", mf.openAIGELU}} {
		if a.on {
			acts = append(acts, a.flag)
		}
	}
	switch {
	case len(acts) > 1:
		add("%s each choose the MLP's activation: give one", strings.Join(acts, " and "))
	case mf.swiglu:
		m.ActivationFunc, m.GatedLinearUnit = config.SiLU, true
	case mf.squaredReLU:
		m.ActivationFunc = config.SquaredReLU
	case mf.openAIGELU:
		m.ActivationFunc = config.OpenAIGELU
	}
	if mf.noBiasLinear {
		m.AddBiasLinear = false
	}
	if mf.swiglu {
		if mf.noBiasSwiGLUFusion {
			m.BiasActivationFusion = false
		}
	} else if mf.noBiasGELUFusion || !m.AddBiasLinear {
		m.BiasActivationFusion = false
	}

	switch {
	case mf.groupQueryAttention && mf.numQueryGroups < 1:
		add("--num-query-groups %d: grouped-query attention needs at least 1 key/value head group: set --num-query-groups to a divisor of --num-attention-heads", mf.numQueryGroups)
	case mf.groupQueryAttention:
		m.NumQueryGroups = mf.numQueryGroups
	case f.Changed("num-query-groups"):
		add("--num-query-groups %d takes effect only with --group-query-attention (without it every head has its own key and value): add --group-query-attention, or drop --num-query-groups", mf.numQueryGroups)
	}

	if mf.useRotary {
		if f.Changed("position-embedding-type") && m.PositionEmbeddingType != config.RoPE {
			add("--use-rotary-position-embeddings and --position-embedding-type %s choose two position embeddings: give one", m.PositionEmbeddingType)
		} else {
			m.PositionEmbeddingType = config.RoPE
		}
	}
	if mf.noPositionEmbedding && !m.UsesRoPE() {
		add("--no-position-embedding is the reference's deprecated spelling, accepted only with rope (where it changes nothing): for a model without position embeddings use --position-embedding-type none")
	}
	if !m.UsesRoPE() {
		for _, r := range []string{"rotary-base", "rotary-percent", "rotary-interleaved"} {
			if f.Changed(r) {
				add("--%s shapes rotary position embeddings, and the position embedding is %s: add --position-embedding-type rope, or drop --%s", r, m.PositionEmbedding(), r)
			}
		}
	}
	if mf.noInitialization {
		m.PerformInitialization = false
	}
	if mf.noGradAccumulationFusion {
		m.GradientAccumulationFusion = false
	}
	if mf.untie {
		m.ShareEmbeddingsAndOutputWeights = false
	}
	mf.moe.apply(add)
	return invalidArguments(errs)
}

// invalidArguments returns the errors as gotron train reports invalid
// arguments ("invalid arguments: …", or a list), nil if none.
func invalidArguments(errs []string) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("invalid arguments: %s", errs[0])
	}
	return fmt.Errorf("invalid arguments (%d):\n  - %s", len(errs), strings.Join(errs, "\n  - "))
}

// addMLAFlags adds multi-latent attention's flags (the reference's mla and
// YaRN arguments, with its defaults).
func addMLAFlags(f *pflag.FlagSet, a *config.MLA) {
	f.BoolVar(&a.MultiLatentAttention, "multi-latent-attention", a.MultiLatentAttention, "multi-latent attention (DeepSeek's MLA) in place of linear_qkv: keys and values through a low-rank latent, rotary channels apart")
	f.IntVar(&a.QLoRARank, "q-lora-rank", a.QLoRARank, "MLA: the queries' latent width (0: project the queries directly)")
	f.IntVar(&a.KVLoRARank, "kv-lora-rank", a.KVLoRARank, "MLA: the keys' and values' latent width")
	f.IntVar(&a.QKHeadDim, "qk-head-dim", a.QKHeadDim, "MLA: query and key channels per head without position")
	f.IntVar(&a.QKPosEmbHeadDim, "qk-pos-emb-head-dim", a.QKPosEmbHeadDim, "MLA: query and key channels per head with the rotary embedding")
	f.IntVar(&a.VHeadDim, "v-head-dim", a.VHeadDim, "MLA: value channels per head")
	f.StringVar(&a.RopeType, "rope-type", a.RopeType, "MLA's rotary embedding: rope or yarn")
	f.Float64Var(&a.RotaryScalingFactor, "rotary-scaling-factor", a.RotaryScalingFactor, "YaRN's context scaling factor")
	f.Float64Var(&a.MScale, "mscale", a.MScale, "YaRN's mscale")
	f.Float64Var(&a.MScaleAllDim, "mscale-all-dim", a.MScaleAllDim, "YaRN's mscale_all_dim (also MLA's softmax scale)")
	f.IntVar(&a.OriginalMaxPositionEmbeddings, "yarn-original-max-position-embeddings", a.OriginalMaxPositionEmbeddings, "YaRN: the context the frequencies were trained for")
	f.Float64Var(&a.BetaFast, "yarn-beta-fast", a.BetaFast, "YaRN: the correction range's fast rotations")
	f.Float64Var(&a.BetaSlow, "yarn-beta-slow", a.BetaSlow, "YaRN: the correction range's slow rotations")
}
