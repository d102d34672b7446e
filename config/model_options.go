package config

import (
	"fmt"
	"math"
	"strings"
)

// The model options of TransformerConfig beyond the GPT-2 shape: the
// normalisation, the MLP's activation and gating, biases, grouped-query
// attention and the position embedding (Llama-, Mistral- and Qwen-class
// GPTs). Their zero values and DefaultTransformerConfig give the GPT-2
// shape gotron has always built.

// Normalizations are the values of TransformerConfig.Normalization.
const (
	LayerNormType = "LayerNorm" // (x − mean)/sqrt(var + eps)·w + b
	RMSNormType   = "RMSNorm"   // x/sqrt(mean(x²) + eps)·w, no bias
)

// Activation functions (TransformerConfig.ActivationFunc).
const (
	// GELU is F.gelu: the erf form x·Φ(x), or its tanh approximation when
	// Megatron fuses it with linear_fc1's bias (BiasActivationFusion with
	// AddBiasLinear; see TanhGELU).
	GELU = "gelu"
	// OpenAIGELU is the tanh approximation of GELU always (--openai-gelu).
	OpenAIGELU = "openai_gelu"
	// SiLU is x·σ(x); with GatedLinearUnit it is SwiGLU (--swiglu).
	SiLU = "silu"
	// SquaredReLU is max(x, 0)² (--squared-relu).
	SquaredReLU = "squared_relu"
)

// Position embedding types (TransformerConfig.PositionEmbeddingType).
const (
	LearnedAbsolute = "learned_absolute" // embedding.position_embeddings.weight
	RoPE            = "rope"             // rotary embeddings on queries and keys
	NoPositions     = "none"             // no position information (NoPE)
)

// RMSNorm reports whether the layer norms are RMSNorm (else LayerNorm).
func (c TransformerConfig) RMSNorm() bool { return c.Normalization == RMSNormType }

// NormName returns the normalisation, LayerNorm when unset.
func (c TransformerConfig) NormName() string {
	if c.Normalization == "" {
		return LayerNormType
	}
	return c.Normalization
}

// Activation returns ActivationFunc, gelu when unset.
func (c TransformerConfig) Activation() string {
	if c.ActivationFunc == "" {
		return GELU
	}
	return c.ActivationFunc
}

// TanhGELU reports whether GELU is computed in its tanh form, as Megatron's
// fused bias-GELU and bias-GEGLU compute it: --openai-gelu, or gelu with
// bias_activation_fusion and either a linear_fc1 bias or a gated linear
// unit (the training flags turn the fusion off with --disable-bias-linear,
// and the unfused F.gelu is the erf form).
func (c TransformerConfig) TanhGELU() bool {
	switch c.Activation() {
	case OpenAIGELU:
		return true
	case GELU:
		return c.BiasActivationFusion && (c.AddBiasLinear || c.GatedLinearUnit)
	}
	return false
}

// QueryGroups returns the number of key/value heads g: NumQueryGroups, or
// the number of attention heads when unset (multi-head attention).
func (c TransformerConfig) QueryGroups() int {
	if c.NumQueryGroups > 0 {
		return c.NumQueryGroups
	}
	return c.NumAttentionHeads
}

// QKVWidth returns linear_qkv's output width (n + 2g)·d: per group its n/g
// query heads, then one key and one value head, d = HeadDim() each.
func (c TransformerConfig) QKVWidth() int {
	return (c.NumAttentionHeads + 2*c.QueryGroups()) * c.HeadDim()
}

// AttentionWidth returns n·d, the width of the attention's output and of
// linear_proj's input (h unless kv_channels is set; n·v_head_dim under
// multi-latent attention).
func (c TransformerConfig) AttentionWidth() int {
	if c.MultiLatentAttention {
		return c.NumAttentionHeads * c.VHeadDim
	}
	return c.NumAttentionHeads * c.HeadDim()
}

// FC1Width returns linear_fc1's output width: FFN(), doubled for a gated
// linear unit (gate and up projections).
func (c TransformerConfig) FC1Width() int {
	if c.GatedLinearUnit {
		return 2 * c.FFN()
	}
	return c.FFN()
}

// QKVBias reports whether linear_qkv has a bias: add_bias_linear or
// add_qkv_bias.
func (c TransformerConfig) QKVBias() bool { return c.AddBiasLinear || c.AddQKVBias }

// PositionEmbedding returns PositionEmbeddingType, learned_absolute when
// unset.
func (c TransformerConfig) PositionEmbedding() string {
	if c.PositionEmbeddingType == "" {
		return LearnedAbsolute
	}
	return c.PositionEmbeddingType
}

// LearnedPositions reports whether the model has a learned absolute
// position embedding.
func (c TransformerConfig) LearnedPositions() bool { return c.PositionEmbedding() == LearnedAbsolute }

// UsesRoPE reports whether queries and keys are rotated (RoPE).
func (c TransformerConfig) UsesRoPE() bool { return c.PositionEmbedding() == RoPE }

// RotaryDim returns the number of rotated channels of each head:
// int(d·rotary_percent), as Megatron truncates it; under multi-latent
// attention, of the qk_pos_emb_head_dim rotary channels (all of them under
// YaRN, whose embedding keeps its whole width, as the reference's
// YarnRotaryEmbedding does).
func (c TransformerConfig) RotaryDim() int {
	d := c.HeadDim()
	if c.MultiLatentAttention {
		d = c.QKPosEmbHeadDim
		if c.RopeType == "yarn" {
			return d
		}
	}
	p := c.RotaryPercent
	if p <= 0 || p >= 1 {
		return d
	}
	return int(float64(d) * p)
}

// SwiGLUFFN is the MLP width Megatron's training flags give --swiglu
// without --ffn-hidden-size: two thirds of 4·h, rounded down to a multiple
// of 64, so that the gated MLP has about the parameters of the 4·h one.
func SwiGLUFFN(hidden int) int { return int(4*float64(hidden)*2/3/64) * 64 }

// ValidateModelOptions reports the violated rules of the options of this
// file alone (Validate checks them with everything else): for a model
// read back from a record, whose other settings may still be unset.
func (c TransformerConfig) ValidateModelOptions() error {
	var vs violationList
	c.modelOptionViolations(&vs)
	return NewValidationError(vs)
}

// modelOptionViolations checks the options of this file.
func (c TransformerConfig) modelOptionViolations(vs *violationList) {
	switch c.Normalization {
	case "", LayerNormType, RMSNormType:
	default:
		vs.add(fieldList("normalization"), "normalization %q is not known: choose --normalization LayerNorm or RMSNorm", c.Normalization)
	}
	switch c.ActivationFunc {
	case "", GELU, OpenAIGELU, SiLU, SquaredReLU:
	default:
		vs.add(fieldList("activation_func"), "activation_func %q is not known: choose gelu, openai_gelu, silu (--swiglu with gated_linear_unit) or squared_relu (--squared-relu)", c.ActivationFunc)
	}
	switch c.PositionEmbeddingType {
	case "", LearnedAbsolute, RoPE, NoPositions:
	default:
		vs.add(fieldList("position_embedding_type"), "position_embedding_type %q is not known: choose --position-embedding-type learned_absolute, rope or none", c.PositionEmbeddingType)
	}
	n, g := c.NumAttentionHeads, c.NumQueryGroups
	if g < 0 {
		vs.add(fieldList("num_query_groups"), "num_query_groups is %d: it must be positive (or 0 for one group per head); set --num-query-groups", g)
	} else if g > 0 && n > 0 && n%g != 0 {
		vs.add(fieldList("num_query_groups", "num_attention_heads"),
			"num_attention_heads %d is not divisible by num_query_groups %d: each group shares its key and value heads with an equal number of query heads; choose --num-query-groups a divisor of %d",
			n, g, n)
	}
	if tp := c.TensorModelParallelSize; tp > 1 && g > 0 && g%tp != 0 {
		vs.add(fieldList("num_query_groups", "tensor_model_parallel_size"),
			"num_query_groups %d is not divisible by tensor_model_parallel_size %d: each tensor-parallel rank holds whole key/value groups; choose --num-query-groups a multiple of %d (or a smaller --tensor-model-parallel-size)",
			g, tp, tp)
	}
	if c.KVChannels < 0 {
		vs.add(fieldList("kv_channels"), "kv_channels is %d: it must be positive (or 0 for hidden_size/num_attention_heads); set --kv-channels", c.KVChannels)
	} else if w := (float64(n) + 2*float64(c.QueryGroups())) * float64(c.KVChannels); n > 0 && w > 1<<31 {
		vs.add(fieldList("kv_channels", "num_attention_heads"),
			"kv_channels %d with num_attention_heads %d makes linear_qkv %.3g columns wide, beyond any model (at most 2^31): choose a smaller --kv-channels", c.HeadDim(), n, w)
	}
	if c.UsesRoPE() || c.MultiLatentAttention {
		if p := c.RotaryPercent; !(p > 0 && p <= 1) || math.IsNaN(p) {
			vs.add(fieldList("rotary_percent"), "rotary_percent is %g: the rotated fraction of each head must lie in (0, 1]; set --rotary-percent", p)
		} else if d := c.RotaryDim(); c.MultiLatentAttention && c.QKPosEmbHeadDim > 0 && (d < 2 || d%2 != 0) {
			vs.add(fieldList("rotary_percent", "qk_pos_emb_head_dim"),
				"rotary_percent %g of qk_pos_emb_head_dim %d rotates %d channels: RoPE rotates channel pairs, so the count must be even and at least 2; choose --rotary-percent (or --qk-pos-emb-head-dim)",
				c.RotaryPercent, c.QKPosEmbHeadDim, d)
		} else if !c.MultiLatentAttention && c.HeadDim() > 0 && (d < 2 || d%2 != 0) {
			vs.add(fieldList("rotary_percent", "kv_channels"),
				"rotary_percent %g of head dimension %d (kv_channels, or hidden_size/num_attention_heads) rotates %d channels: RoPE rotates channel pairs, so the count must be even and at least 2; choose --rotary-percent (or --kv-channels) so that head_dim·percent is even",
				c.RotaryPercent, c.HeadDim(), d)
		}
		if c.RotaryBase <= 0 {
			vs.add(fieldList("rotary_base"), "rotary_base is %d: it must be positive; set --rotary-base", c.RotaryBase)
		}
	}
	if tp := c.TensorModelParallelSize; c.GatedLinearUnit && tp > 1 && c.FFN() > 0 && c.FFN()%tp != 0 {
		vs.add(fieldList("gated_linear_unit", "ffn_hidden_size", "tensor_model_parallel_size"),
			"ffn_hidden_size %d is not divisible by tensor_model_parallel_size %d: with a gated linear unit (gated_linear_unit, --swiglu) each rank holds matching slices of the gate and the up projection; choose --ffn-hidden-size a multiple of %d",
			c.FFN(), tp, tp)
	}
}

// OptionsDesc names the model options that differ from the GPT-2 shape,
// as a user would list them ("RMSNorm, SwiGLU, RoPE, 2 query groups,
// untied embeddings, no biases"), or "" for the GPT-2 shape.
func (c TransformerConfig) OptionsDesc() string {
	var out []string
	add := func(on bool, s string, args ...any) {
		if on {
			out = append(out, fmt.Sprintf(s, args...))
		}
	}
	add(c.RMSNorm(), "RMSNorm")
	add(c.LayernormZeroCenteredGamma, "zero-centred norm weights")
	add(c.QKLayernorm, "q/k norms")
	switch act := c.Activation(); {
	case c.GatedLinearUnit && act == SiLU:
		out = append(out, "SwiGLU")
	case c.GatedLinearUnit:
		out = append(out, "gated "+act)
	case act == GELU && !c.TanhGELU():
		out = append(out, "GELU (erf)")
	case act != GELU:
		out = append(out, act)
	}
	switch p := c.PositionEmbedding(); {
	case p == RoPE && (c.RotaryPercent != 1 || c.RotaryInterleaved || c.RotaryBase != 10000):
		out = append(out, fmt.Sprintf("RoPE (base %d, %g of each head, interleaved %v)", c.RotaryBase, c.RotaryPercent, c.RotaryInterleaved))
	case p == RoPE:
		out = append(out, "RoPE")
	case p == NoPositions:
		out = append(out, "no position embedding")
	}
	add(c.NumQueryGroups > 0 && c.NumQueryGroups < c.NumAttentionHeads, "%d query groups", c.NumQueryGroups)
	add(c.KVChannels > 0, "kv_channels %d", c.KVChannels)
	add(!c.ShareEmbeddingsAndOutputWeights, "untied embeddings")
	add(!c.AddBiasLinear && !c.AddQKVBias, "no biases")
	add(!c.AddBiasLinear && c.AddQKVBias, "biases on linear_qkv only")
	add(c.ApplyResidualConnectionPostLayernorm, "post-norm residuals")
	add(c.MultiLatentAttention && c.RopeType == "yarn" && c.RotaryScalingFactor > 1, "multi-latent attention with YaRN ×%g", c.RotaryScalingFactor)
	add(c.MultiLatentAttention && !(c.RopeType == "yarn" && c.RotaryScalingFactor > 1), "multi-latent attention")
	add(c.MTPNumLayers > 0, "MTP depths: %d", c.MTPNumLayers)
	return strings.Join(out, ", ")
}
