package train

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gotron/gotron/config"
)

// modelOption is one model option a checkpoint records (ckpt.Args.Model)
// under TransformerConfig's JSON name: its value as text (get) and how to
// set it back (set).
type modelOption struct {
	key string
	get func(config.TransformerConfig) string
	set func(*config.TransformerConfig, string) error
}

// modelOptions are the model options a checkpoint records when they
// differ from config.DefaultTransformerConfig's (the GPT-2 shape), which
// is what a checkpoint without the record (older than it) was saved with.
// The named kinds (normalization, activation_func,
// position_embedding_type) are recorded by their effective names.
var modelOptions = []modelOption{
	textOption("normalization", config.TransformerConfig.NormName, func(c *config.TransformerConfig) *string { return &c.Normalization }),
	float32Option("layernorm_epsilon", func(c *config.TransformerConfig) *float32 { return &c.LayernormEpsilon }),
	boolOption("layernorm_zero_centered_gamma", func(c *config.TransformerConfig) *bool { return &c.LayernormZeroCenteredGamma }),
	boolOption("qk_layernorm", func(c *config.TransformerConfig) *bool { return &c.QKLayernorm }),
	textOption("activation_func", config.TransformerConfig.Activation, func(c *config.TransformerConfig) *string { return &c.ActivationFunc }),
	boolOption("gated_linear_unit", func(c *config.TransformerConfig) *bool { return &c.GatedLinearUnit }),
	boolOption("bias_activation_fusion", func(c *config.TransformerConfig) *bool { return &c.BiasActivationFusion }),
	boolOption("add_bias_linear", func(c *config.TransformerConfig) *bool { return &c.AddBiasLinear }),
	boolOption("add_qkv_bias", func(c *config.TransformerConfig) *bool { return &c.AddQKVBias }),
	intOption("num_query_groups", func(c *config.TransformerConfig) *int { return &c.NumQueryGroups }),
	intOption("kv_channels", func(c *config.TransformerConfig) *int { return &c.KVChannels }),
	textOption("position_embedding_type", config.TransformerConfig.PositionEmbedding, func(c *config.TransformerConfig) *string { return &c.PositionEmbeddingType }),
	intOption("rotary_base", func(c *config.TransformerConfig) *int { return &c.RotaryBase }),
	float64Option("rotary_percent", func(c *config.TransformerConfig) *float64 { return &c.RotaryPercent }),
	boolOption("rotary_interleaved", func(c *config.TransformerConfig) *bool { return &c.RotaryInterleaved }),
	boolOption("apply_residual_connection_post_layernorm", func(c *config.TransformerConfig) *bool { return &c.ApplyResidualConnectionPostLayernorm }),
	boolOption("share_embeddings_and_output_weights", func(c *config.TransformerConfig) *bool { return &c.ShareEmbeddingsAndOutputWeights }),
	intOption("num_moe_experts", func(c *config.TransformerConfig) *int { return &c.NumMoEExperts }),
	moeOption(modelOption{"moe_layer_freq", func(c config.TransformerConfig) string { return config.FormatMoELayerFreq(c.MoELayerFreq) },
		func(c *config.TransformerConfig, v string) error {
			f, _, err := config.ParseMoELayerFreq(v)
			c.MoELayerFreq = f
			return err
		}}),
	moeOption(intOption("moe_ffn_hidden_size", func(c *config.TransformerConfig) *int { return &c.MoEFFNHiddenSize })),
	moeOption(intOption("moe_shared_expert_intermediate_size", func(c *config.TransformerConfig) *int { return &c.MoESharedExpertIntermediateSize })),
	moeOption(intOption("moe_router_topk", func(c *config.TransformerConfig) *int { return &c.MoERouterTopK })),
	moeOption(textOption("moe_router_score_function", nil, func(c *config.TransformerConfig) *string { return &c.MoERouterScoreFunction })),
	moeOption(boolOption("moe_router_pre_softmax", func(c *config.TransformerConfig) *bool { return &c.MoERouterPreSoftmax })),
	moeOption(intOption("moe_router_num_groups", func(c *config.TransformerConfig) *int { return &c.MoERouterNumGroups })),
	moeOption(intOption("moe_router_group_topk", func(c *config.TransformerConfig) *int { return &c.MoERouterGroupTopK })),
	moeOption(float64Option("moe_router_topk_scaling_factor", func(c *config.TransformerConfig) *float64 { return &c.MoERouterTopKScalingFactor })),
	moeOption(textOption("moe_router_load_balancing_type", nil, func(c *config.TransformerConfig) *string { return &c.MoERouterLoadBalancingType })),
	moeOption(float64Option("moe_aux_loss_coeff", func(c *config.TransformerConfig) *float64 { return &c.MoEAuxLossCoeff })),
	moeOption(float64Option("moe_z_loss_coeff", func(c *config.TransformerConfig) *float64 { return &c.MoEZLossCoeff })),
	moeOption(boolOption("moe_router_enable_expert_bias", func(c *config.TransformerConfig) *bool { return &c.MoERouterEnableExpertBias })),
	moeOption(float64Option("moe_router_bias_update_rate", func(c *config.TransformerConfig) *float64 { return &c.MoERouterBiasUpdateRate })),
	moeOption(float64Option("moe_expert_capacity_factor", func(c *config.TransformerConfig) *float64 { return &c.MoEExpertCapacityFactor })),
	moeOption(textOption("moe_token_drop_policy", nil, func(c *config.TransformerConfig) *string { return &c.MoETokenDropPolicy })),
	moeOption(boolOption("moe_pad_expert_input_to_capacity", func(c *config.TransformerConfig) *bool { return &c.MoEPadExpertInputToCapacity })),
}

// moeOption is o, an option of the MoE layers, which a dense model
// (num_moe_experts 0) does not read: its value there is the default's,
// so that a dense model records none.
func moeOption(o modelOption) modelOption {
	get := o.get
	o.get = func(c config.TransformerConfig) string {
		if c.NumMoEExperts == 0 {
			return get(config.DefaultTransformerConfig())
		}
		return get(c)
	}
	return o
}

// textOption is an option of text; name returns its effective name (nil:
// the field as it is).
func textOption(key string, name func(config.TransformerConfig) string, field func(*config.TransformerConfig) *string) modelOption {
	if name == nil {
		name = func(c config.TransformerConfig) string { return *field(&c) }
	}
	return modelOption{key, name, func(c *config.TransformerConfig, v string) error { *field(c) = v; return nil }}
}

func boolOption(key string, field func(*config.TransformerConfig) *bool) modelOption {
	return modelOption{key, func(c config.TransformerConfig) string { return strconv.FormatBool(*field(&c)) },
		func(c *config.TransformerConfig, v string) error {
			b, err := strconv.ParseBool(v)
			*field(c) = b
			return err
		}}
}

func intOption(key string, field func(*config.TransformerConfig) *int) modelOption {
	return modelOption{key, func(c config.TransformerConfig) string { return strconv.Itoa(*field(&c)) },
		func(c *config.TransformerConfig, v string) error {
			n, err := strconv.Atoi(v)
			*field(c) = n
			return err
		}}
}

func float32Option(key string, field func(*config.TransformerConfig) *float32) modelOption {
	return modelOption{key, func(c config.TransformerConfig) string { return strconv.FormatFloat(float64(*field(&c)), 'g', -1, 32) },
		func(c *config.TransformerConfig, v string) error {
			x, err := strconv.ParseFloat(v, 32)
			*field(c) = float32(x)
			return err
		}}
}

func float64Option(key string, field func(*config.TransformerConfig) *float64) modelOption {
	return modelOption{key, func(c config.TransformerConfig) string { return strconv.FormatFloat(*field(&c), 'g', -1, 64) },
		func(c *config.TransformerConfig, v string) error {
			x, err := strconv.ParseFloat(v, 64)
			*field(c) = x
			return err
		}}
}

// modelRecord returns the model options of m that differ from their
// defaults, as text by their JSON names, and always layernorm_epsilon:
// checkpoints older than the record were saved with any
// --layernorm-epsilon, so a record that lists it tells a new checkpoint
// from an old one.
func modelRecord(m config.TransformerConfig) map[string]string {
	def := config.DefaultTransformerConfig()
	r := map[string]string{}
	for _, o := range modelOptions {
		if v := o.get(m); v != o.get(def) || o.key == epsilonKey {
			r[o.key] = v
		}
	}
	return r
}

// epsilonKey is the option every record lists (modelRecord).
const epsilonKey = "layernorm_epsilon"

// applyModelRecord sets every model option of m to the record's value,
// or to its default when the record does not list it. A checkpoint older
// than the record (rec nil, or without layernorm_epsilon) keeps m's
// epsilon: it was saved with whatever --layernorm-epsilon its run had. A
// key this gotron does not know, or a value that is not of the option's
// kind, is an error; so is a record whose model is not valid.
func applyModelRecord(m *config.TransformerConfig, rec map[string]string) error {
	known := map[string]bool{}
	for _, o := range modelOptions {
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
		return fmt.Errorf("the checkpoint records model options this gotron does not know (%s): load it with the gotron that saved it", strings.Join(unknown, ", "))
	}
	def := config.DefaultTransformerConfig()
	for _, o := range modelOptions {
		v, ok := rec[o.key]
		switch {
		case !ok && o.key == epsilonKey:
			continue // an old checkpoint: its epsilon is not recorded
		case !ok:
			v = o.get(def)
		}
		if err := o.set(m, v); err != nil {
			return fmt.Errorf("the checkpoint records the model option %s as %q, which is not a value of it: its manifest is damaged", o.key, v)
		}
	}
	if err := m.ValidateModelOptions(); err != nil {
		return fmt.Errorf("the checkpoint's recorded model is not valid (its manifest is damaged): %w", err)
	}
	if err := m.ValidateMoEOptions(); err != nil {
		return fmt.Errorf("the checkpoint's recorded model is not valid (its manifest is damaged): %w", err)
	}
	return nil
}

// modelDiffs lists how the model options of the checkpoint's model
// (saved) and this run's (now) differ, each with its flag, comparing the
// models they build rather than their spellings: the number of key/value
// groups and the head dimension as they take effect, the RoPE settings
// only when both rotate, the bias-GELU fusion only where it selects
// GELU's tanh form, linear_qkv's bias whether it comes from
// --add-qkv-bias or from the linear biases.
func modelDiffs(saved, now config.TransformerConfig) []string {
	var d []string
	value := func(flag, s, n string) {
		if s != n {
			d = append(d, fmt.Sprintf("%s %s in the checkpoint, %s in this run", flag, s, n))
		}
	}
	given := func(flag string, s, n bool) {
		if s != n {
			d = append(d, either(flagIf(flag, s), flagIf(flag, n)))
		}
	}
	eps := func(c config.TransformerConfig) string {
		return strconv.FormatFloat(float64(c.LayernormEpsilon), 'g', -1, 32)
	}
	value("--normalization", saved.NormName(), now.NormName())
	value("--norm-epsilon", eps(saved), eps(now))
	given("--apply-layernorm-1p", saved.LayernormZeroCenteredGamma, now.LayernormZeroCenteredGamma)
	given("--qk-layernorm", saved.QKLayernorm, now.QKLayernorm)
	if s, n := activationFlag(saved), activationFlag(now); s != n {
		d = append(d, either(s, n))
	} else if saved.AddBiasLinear == now.AddBiasLinear && saved.TanhGELU() != now.TanhGELU() {
		given("--no-bias-gelu-fusion", !saved.BiasActivationFusion, !now.BiasActivationFusion)
	}
	given("--disable-bias-linear", !saved.AddBiasLinear, !now.AddBiasLinear)
	if saved.AddBiasLinear == now.AddBiasLinear {
		given("--add-qkv-bias", saved.QKVBias(), now.QKVBias())
	}
	value("--num-query-groups", strconv.Itoa(saved.QueryGroups()), strconv.Itoa(now.QueryGroups()))
	value("--kv-channels", strconv.Itoa(saved.HeadDim()), strconv.Itoa(now.HeadDim()))
	value("--position-embedding-type", saved.PositionEmbedding(), now.PositionEmbedding())
	if saved.UsesRoPE() && now.UsesRoPE() {
		value("--rotary-base", strconv.Itoa(saved.RotaryBase), strconv.Itoa(now.RotaryBase))
		value("--rotary-percent", strconv.FormatFloat(saved.RotaryPercent, 'g', -1, 64), strconv.FormatFloat(now.RotaryPercent, 'g', -1, 64))
		given("--rotary-interleaved", saved.RotaryInterleaved, now.RotaryInterleaved)
	}
	given("--apply-residual-connection-post-layernorm", saved.ApplyResidualConnectionPostLayernorm, now.ApplyResidualConnectionPostLayernorm)
	given("--untie-embeddings-and-output-weights", !saved.ShareEmbeddingsAndOutputWeights, !now.ShareEmbeddingsAndOutputWeights)
	return append(d, moeDiffs(saved, now)...)
}

// moeDiffs is modelDiffs of the MoE options: the number of experts, and,
// when both models have experts, the options of their MoE layers as they
// take effect: the MoE layers (whatever --moe-layer-freq's spelling), each
// expert's width (--moe-ffn-hidden-size, or --ffn-hidden-size), the expert
// bias's rate only when both route with one, the drop policy and the
// padding only when both drop tokens. The dispatcher and the grouped GEMM
// do not change the numbers and are not compared.
func moeDiffs(saved, now config.TransformerConfig) []string {
	var d []string
	if s, n := saved.NumMoEExperts, now.NumMoEExperts; s != n {
		experts := func(e int) string {
			if e == 0 {
				return "unset"
			}
			return strconv.Itoa(e)
		}
		return []string{fmt.Sprintf("--num-experts %s in the checkpoint, %s in this run", experts(s), experts(n))}
	}
	if saved.NumMoEExperts == 0 {
		return nil
	}
	value := func(flag, s, n string) {
		if s != n {
			d = append(d, fmt.Sprintf("%s %s in the checkpoint, %s in this run", flag, s, n))
		}
	}
	given := func(flag string, s, n bool) {
		if s != n {
			d = append(d, either(flagIf(flag, s), flagIf(flag, n)))
		}
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if !sameMoELayers(saved, now, max(saved.NumLayers, now.NumLayers)) {
		value("--moe-layer-freq", config.FormatMoELayerFreq(saved.MoELayerFreq), config.FormatMoELayerFreq(now.MoELayerFreq))
	}
	value("--moe-ffn-hidden-size", strconv.Itoa(saved.MoEFFN()), strconv.Itoa(now.MoEFFN()))
	value("--moe-shared-expert-intermediate-size", strconv.Itoa(saved.MoESharedExpertIntermediateSize), strconv.Itoa(now.MoESharedExpertIntermediateSize))
	value("--moe-router-topk", strconv.Itoa(saved.MoERouterTopK), strconv.Itoa(now.MoERouterTopK))
	value("--moe-router-score-function", saved.MoERouterScoreFunction, now.MoERouterScoreFunction)
	given("--moe-router-pre-softmax", saved.MoERouterPreSoftmax, now.MoERouterPreSoftmax)
	value("--moe-router-num-groups", strconv.Itoa(saved.MoERouterNumGroups), strconv.Itoa(now.MoERouterNumGroups))
	value("--moe-router-group-topk", strconv.Itoa(saved.MoERouterGroupTopK), strconv.Itoa(now.MoERouterGroupTopK))
	value("--moe-router-topk-scaling-factor", num(saved.MoERouterTopKScalingFactor), num(now.MoERouterTopKScalingFactor))
	value("--moe-router-load-balancing-type", saved.MoERouterLoadBalancingType, now.MoERouterLoadBalancingType)
	value("--moe-aux-loss-coeff", num(saved.MoEAuxLossCoeff), num(now.MoEAuxLossCoeff))
	value("--moe-z-loss-coeff", num(saved.MoEZLossCoeff), num(now.MoEZLossCoeff))
	given("--moe-router-enable-expert-bias", saved.MoERouterEnableExpertBias, now.MoERouterEnableExpertBias)
	if saved.MoERouterEnableExpertBias && now.MoERouterEnableExpertBias {
		value("--moe-router-bias-update-rate", num(saved.MoERouterBiasUpdateRate), num(now.MoERouterBiasUpdateRate))
	}
	value("--moe-expert-capacity-factor", num(saved.MoEExpertCapacityFactor), num(now.MoEExpertCapacityFactor))
	if saved.MoEExpertCapacityFactor > 0 && now.MoEExpertCapacityFactor > 0 {
		value("--moe-token-drop-policy", saved.MoETokenDropPolicy, now.MoETokenDropPolicy)
		given("--moe-pad-expert-input-to-capacity", saved.MoEPadExpertInputToCapacity, now.MoEPadExpertInputToCapacity)
	}
	return d
}

// maxComparedLayers bounds the layers sameMoELayers compares: no model
// has more, and a resume is compared before its arguments are validated.
const maxComparedLayers = 1 << 20

// sameMoELayers reports whether a and b make the same of the first n
// layers MoE.
func sameMoELayers(a, b config.TransformerConfig, n int) bool {
	for i := range min(n, maxComparedLayers) {
		if a.IsMoELayer(i) != b.IsMoELayer(i) {
			return false
		}
	}
	return true
}

// activationFlag returns the flag that selects m's MLP activation ("" for
// GELU, the default), or the config's names for a combination no flag
// gives.
func activationFlag(m config.TransformerConfig) string {
	switch a, glu := m.Activation(), m.GatedLinearUnit; {
	case a == config.GELU && !glu:
		return ""
	case a == config.SiLU && glu:
		return "--swiglu"
	case a == config.SquaredReLU && !glu:
		return "--squared-relu"
	case a == config.OpenAIGELU && !glu:
		return "--openai-gelu"
	case glu:
		return fmt.Sprintf("activation_func %s with gated_linear_unit", a)
	default:
		return "activation_func " + a
	}
}

// flagIf returns flag when on, else "".
func flagIf(flag string, on bool) string {
	if on {
		return flag
	}
	return ""
}

// either says which of two flags (or neither, "") the checkpoint and this
// run were given; s and n differ.
func either(s, n string) string {
	switch {
	case n == "":
		return s + " in the checkpoint, not in this run"
	case s == "":
		return n + " in this run, not in the checkpoint"
	}
	return s + " in the checkpoint, " + n + " in this run"
}
