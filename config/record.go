package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A model's record is the text a checkpoint keeps of the options that
// change its numbers beyond the shapes (the normalisation, activation,
// biases, grouped-query attention, position embedding, MoE routing): a
// map from TransformerConfig's JSON names to values, listing the options
// that differ from DefaultTransformerConfig. The dispatcher and the
// grouped GEMM, which do not change the numbers, are not in it.

// Record returns the model options of c that differ from their
// defaults, as text by their JSON names, and always layernorm_epsilon:
// checkpoints older than the record were saved with any epsilon, so a
// record that lists it tells a new checkpoint from an old one.
func (c TransformerConfig) Record() map[string]string {
	def := DefaultTransformerConfig()
	r := map[string]string{}
	for _, o := range recordOptions {
		if v := o.get(c); v != o.get(def) || o.key == epsilonKey {
			r[o.key] = v
		}
	}
	return r
}

// epsilonKey is the option every record lists (Record).
const epsilonKey = "layernorm_epsilon"

// UnknownOptionsError is ApplyRecord's error for a record that lists
// options this version does not know (one written by a newer gotron).
type UnknownOptionsError struct {
	Keys []string // sorted
}

func (e *UnknownOptionsError) Error() string {
	return "model options this gotron does not know: " + strings.Join(e.Keys, ", ")
}

// ApplyRecord sets every option of c that a record may list to the
// record's value, or to its default when the record does not list it.
// A record older than layernorm_epsilon's (rec nil, or without it) keeps
// c's epsilon. A key this version does not know is an
// *UnknownOptionsError; a value that is not of its option's kind, or a
// record whose model is not valid, is an error naming it.
func (c *TransformerConfig) ApplyRecord(rec map[string]string) error {
	known := map[string]bool{}
	for _, o := range recordOptions {
		known[o.key] = true
	}
	var unknown []string
	for k := range rec {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &UnknownOptionsError{Keys: unknown}
	}
	def := DefaultTransformerConfig()
	for _, o := range recordOptions {
		v, ok := rec[o.key]
		switch {
		case !ok && o.key == epsilonKey:
			continue // an old record: its epsilon is not listed
		case !ok:
			v = o.get(def)
		}
		if err := o.set(c, v); err != nil {
			return fmt.Errorf("the model option %s is recorded as %q, which is not a value of it", o.key, v)
		}
	}
	if err := c.ValidateModelOptions(); err != nil {
		return fmt.Errorf("the recorded model is not valid: %w", err)
	}
	if err := c.ValidateMoEOptions(); err != nil {
		return fmt.Errorf("the recorded model is not valid: %w", err)
	}
	return nil
}

// recordOption is one model option Record lists under its JSON name: its value as text (get) and how to
// set it back (set).
type recordOption struct {
	key string
	get func(TransformerConfig) string
	set func(*TransformerConfig, string) error
}

// recordOptions are the model options Record lists when they differ
// from DefaultTransformerConfig's (the GPT-2 shape), which is what a
// checkpoint without the record (older than it) was saved with.
// The named kinds (normalization, activation_func,
// position_embedding_type) are recorded by their effective names.
var recordOptions = []recordOption{
	textOption("normalization", TransformerConfig.NormName, func(c *TransformerConfig) *string { return &c.Normalization }),
	float32Option("layernorm_epsilon", func(c *TransformerConfig) *float32 { return &c.LayernormEpsilon }),
	boolOption("layernorm_zero_centered_gamma", func(c *TransformerConfig) *bool { return &c.LayernormZeroCenteredGamma }),
	boolOption("qk_layernorm", func(c *TransformerConfig) *bool { return &c.QKLayernorm }),
	textOption("activation_func", TransformerConfig.Activation, func(c *TransformerConfig) *string { return &c.ActivationFunc }),
	boolOption("gated_linear_unit", func(c *TransformerConfig) *bool { return &c.GatedLinearUnit }),
	boolOption("bias_activation_fusion", func(c *TransformerConfig) *bool { return &c.BiasActivationFusion }),
	boolOption("add_bias_linear", func(c *TransformerConfig) *bool { return &c.AddBiasLinear }),
	boolOption("add_qkv_bias", func(c *TransformerConfig) *bool { return &c.AddQKVBias }),
	intOption("num_query_groups", func(c *TransformerConfig) *int { return &c.NumQueryGroups }),
	intOption("kv_channels", func(c *TransformerConfig) *int { return &c.KVChannels }),
	textOption("position_embedding_type", TransformerConfig.PositionEmbedding, func(c *TransformerConfig) *string { return &c.PositionEmbeddingType }),
	intOption("rotary_base", func(c *TransformerConfig) *int { return &c.RotaryBase }),
	float64Option("rotary_percent", func(c *TransformerConfig) *float64 { return &c.RotaryPercent }),
	boolOption("rotary_interleaved", func(c *TransformerConfig) *bool { return &c.RotaryInterleaved }),
	boolOption("apply_residual_connection_post_layernorm", func(c *TransformerConfig) *bool { return &c.ApplyResidualConnectionPostLayernorm }),
	boolOption("share_embeddings_and_output_weights", func(c *TransformerConfig) *bool { return &c.ShareEmbeddingsAndOutputWeights }),
	intOption("num_moe_experts", func(c *TransformerConfig) *int { return &c.NumMoEExperts }),
	moeOption(recordOption{"moe_layer_freq", func(c TransformerConfig) string { return FormatMoELayerFreq(c.MoELayerFreq) },
		func(c *TransformerConfig, v string) error {
			f, _, err := ParseMoELayerFreq(v)
			c.MoELayerFreq = f
			return err
		}}),
	moeOption(intOption("moe_ffn_hidden_size", func(c *TransformerConfig) *int { return &c.MoEFFNHiddenSize })),
	moeOption(intOption("moe_shared_expert_intermediate_size", func(c *TransformerConfig) *int { return &c.MoESharedExpertIntermediateSize })),
	moeOption(intOption("moe_router_topk", func(c *TransformerConfig) *int { return &c.MoERouterTopK })),
	moeOption(textOption("moe_router_score_function", nil, func(c *TransformerConfig) *string { return &c.MoERouterScoreFunction })),
	moeOption(boolOption("moe_router_pre_softmax", func(c *TransformerConfig) *bool { return &c.MoERouterPreSoftmax })),
	moeOption(intOption("moe_router_num_groups", func(c *TransformerConfig) *int { return &c.MoERouterNumGroups })),
	moeOption(intOption("moe_router_group_topk", func(c *TransformerConfig) *int { return &c.MoERouterGroupTopK })),
	moeOption(float64Option("moe_router_topk_scaling_factor", func(c *TransformerConfig) *float64 { return &c.MoERouterTopKScalingFactor })),
	moeOption(textOption("moe_router_load_balancing_type", nil, func(c *TransformerConfig) *string { return &c.MoERouterLoadBalancingType })),
	moeOption(float64Option("moe_aux_loss_coeff", func(c *TransformerConfig) *float64 { return &c.MoEAuxLossCoeff })),
	moeOption(float64Option("moe_z_loss_coeff", func(c *TransformerConfig) *float64 { return &c.MoEZLossCoeff })),
	moeOption(boolOption("moe_router_enable_expert_bias", func(c *TransformerConfig) *bool { return &c.MoERouterEnableExpertBias })),
	moeOption(float64Option("moe_router_bias_update_rate", func(c *TransformerConfig) *float64 { return &c.MoERouterBiasUpdateRate })),
	moeOption(float64Option("moe_expert_capacity_factor", func(c *TransformerConfig) *float64 { return &c.MoEExpertCapacityFactor })),
	moeOption(textOption("moe_token_drop_policy", nil, func(c *TransformerConfig) *string { return &c.MoETokenDropPolicy })),
	moeOption(boolOption("moe_pad_expert_input_to_capacity", func(c *TransformerConfig) *bool { return &c.MoEPadExpertInputToCapacity })),
	intOption("mtp_num_layers", func(c *TransformerConfig) *int { return &c.MTPNumLayers }),
	boolOption("multi_latent_attention", func(c *TransformerConfig) *bool { return &c.MultiLatentAttention }),
	mlaOption(intOption("q_lora_rank", func(c *TransformerConfig) *int { return &c.QLoRARank })),
	mlaOption(intOption("kv_lora_rank", func(c *TransformerConfig) *int { return &c.KVLoRARank })),
	mlaOption(intOption("qk_head_dim", func(c *TransformerConfig) *int { return &c.QKHeadDim })),
	mlaOption(intOption("qk_pos_emb_head_dim", func(c *TransformerConfig) *int { return &c.QKPosEmbHeadDim })),
	mlaOption(intOption("v_head_dim", func(c *TransformerConfig) *int { return &c.VHeadDim })),
	mlaOption(textOption("rope_type", nil, func(c *TransformerConfig) *string { return &c.RopeType })),
	mlaOption(float64Option("rotary_scaling_factor", func(c *TransformerConfig) *float64 { return &c.RotaryScalingFactor })),
	mlaOption(intOption("original_max_position_embeddings", func(c *TransformerConfig) *int { return &c.OriginalMaxPositionEmbeddings })),
	mlaOption(float64Option("beta_fast", func(c *TransformerConfig) *float64 { return &c.BetaFast })),
	mlaOption(float64Option("beta_slow", func(c *TransformerConfig) *float64 { return &c.BetaSlow })),
	mlaOption(float64Option("mscale", func(c *TransformerConfig) *float64 { return &c.MScale })),
	mlaOption(float64Option("mscale_all_dim", func(c *TransformerConfig) *float64 { return &c.MScaleAllDim })),
	mtpOption(float64Option("mtp_loss_scaling_factor", func(c *TransformerConfig) *float64 { return &c.MTPLossScalingFactor })),
}

// moeOption is o, an option of the MoE layers, which a dense model
// (num_moe_experts 0) does not read: its value there is the default's,
// so that a dense model records none.
func moeOption(o recordOption) recordOption {
	return readOnlyWith(o, func(c TransformerConfig) bool { return c.NumMoEExperts > 0 })
}

// mtpOption is o, an option of the MTP depths, which a model without them
// does not read (see moeOption).
func mtpOption(o recordOption) recordOption {
	return readOnlyWith(o, func(c TransformerConfig) bool { return c.MTPNumLayers > 0 })
}

// mlaOption is o, an option of multi-latent attention, which a model
// without it does not read (see moeOption).
func mlaOption(o recordOption) recordOption {
	return readOnlyWith(o, func(c TransformerConfig) bool { return c.MultiLatentAttention })
}

// readOnlyWith is o recorded with its default's value where reads(c) is
// false.
func readOnlyWith(o recordOption, reads func(TransformerConfig) bool) recordOption {
	get := o.get
	o.get = func(c TransformerConfig) string {
		if !reads(c) {
			return get(DefaultTransformerConfig())
		}
		return get(c)
	}
	return o
}

// textOption is an option of text; name returns its effective name (nil:
// the field as it is).
func textOption(key string, name func(TransformerConfig) string, field func(*TransformerConfig) *string) recordOption {
	if name == nil {
		name = func(c TransformerConfig) string { return *field(&c) }
	}
	return recordOption{key, name, func(c *TransformerConfig, v string) error { *field(c) = v; return nil }}
}

func boolOption(key string, field func(*TransformerConfig) *bool) recordOption {
	return recordOption{key, func(c TransformerConfig) string { return strconv.FormatBool(*field(&c)) },
		func(c *TransformerConfig, v string) error {
			b, err := strconv.ParseBool(v)
			*field(c) = b
			return err
		}}
}

func intOption(key string, field func(*TransformerConfig) *int) recordOption {
	return recordOption{key, func(c TransformerConfig) string { return strconv.Itoa(*field(&c)) },
		func(c *TransformerConfig, v string) error {
			n, err := strconv.Atoi(v)
			*field(c) = n
			return err
		}}
}

func float32Option(key string, field func(*TransformerConfig) *float32) recordOption {
	return recordOption{key, func(c TransformerConfig) string { return strconv.FormatFloat(float64(*field(&c)), 'g', -1, 32) },
		func(c *TransformerConfig, v string) error {
			x, err := strconv.ParseFloat(v, 32)
			*field(c) = float32(x)
			return err
		}}
}

func float64Option(key string, field func(*TransformerConfig) *float64) recordOption {
	return recordOption{key, func(c TransformerConfig) string { return strconv.FormatFloat(*field(&c), 'g', -1, 64) },
		func(c *TransformerConfig, v string) error {
			x, err := strconv.ParseFloat(v, 64)
			*field(c) = x
			return err
		}}
}
