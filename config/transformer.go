package config

import "math"

// TransformerConfig is the model's configuration: the fields of
// Megatron-Core's TransformerConfig that gotron's GPT uses, with its
// ModelParallelConfig embedded (as the reference's class inherits it).
type TransformerConfig struct {
	ModelParallelConfig

	// PipelinePlacement says which stage of the model each model chunk
	// (pipeline rank, virtual stage) holds: the reference's loop, the zero
	// value, or the V of the ZB-V schedule (two chunks per rank, rank r
	// holding stages r and 2P−1−r). A gotron extension, set from
	// --pipeline-schedule (pp.PlacementOf); the chunks' layers and the
	// embedding group follow it (PipelineChunks, mesh.Sizes.Placement).
	PipelinePlacement PipelinePlacement `json:"-"`

	// NumLayers is the number of transformer layers (num_layers).
	NumLayers int `json:"num_layers"`
	// HiddenSize is the model width h (hidden_size).
	HiddenSize int `json:"hidden_size"`
	// NumAttentionHeads is the number of attention heads n; the head
	// dimension is h/n (num_attention_heads).
	NumAttentionHeads int `json:"num_attention_heads"`
	// FFNHiddenSize is the MLP's inner width; 0 means 4·h (ffn_hidden_size).
	FFNHiddenSize int `json:"ffn_hidden_size"`
	// SeqLength is the training sequence length s (seq_length).
	SeqLength int `json:"seq_length"`
	// MaxPositionEmbeddings is the number of learned absolute positions; 0
	// means SeqLength (max_position_embeddings).
	MaxPositionEmbeddings int `json:"max_position_embeddings"`
	// VocabSize is the tokenizer's vocabulary (vocab_size), before padding.
	VocabSize int `json:"vocab_size"`
	// MakeVocabSizeDivisibleBy pads the vocabulary to a multiple of this
	// times the TP size (make_vocab_size_divisible_by, 128); see
	// PaddedVocabSize.
	MakeVocabSizeDivisibleBy int `json:"make_vocab_size_divisible_by"`
	// LayernormEpsilon is added to the variance in every LayerNorm
	// (layernorm_epsilon, 1e-5).
	LayernormEpsilon float32 `json:"layernorm_epsilon"`
	// HiddenDropout is the dropout probability after linear_proj and
	// linear_fc2 and on the embeddings (hidden_dropout, 0.1).
	HiddenDropout float32 `json:"hidden_dropout"`
	// AttentionDropout is the dropout probability on the attention
	// probabilities (attention_dropout, 0.1).
	AttentionDropout float32 `json:"attention_dropout"`
	// InitMethodStd is the standard deviation of the normal initialisation;
	// linear_proj and linear_fc2 use InitMethodStd/sqrt(2·NumLayers)
	// (init_method_std, 0.02).
	InitMethodStd float64 `json:"init_method_std"`
	// InitMethodXavierUniform draws every weight the init methods draw
	// (the embeddings, the linear layers, the router and the experts;
	// linear_proj and linear_fc2 unscaled) from U(−a, a), a =
	// sqrt(6/(fan_in + fan_out)) of the whole weight (the embeddings' fan
	// the real vocabulary, where Megatron's is the padded one, which
	// depends on the TP size), instead of the normal
	// (--init-method-xavier-uniform: Megatron's init_method and
	// scaled_init_method become torch.nn.init.xavier_uniform_).
	InitMethodXavierUniform bool `json:"init_method_xavier_uniform,omitempty"`
	// ShareEmbeddingsAndOutputWeights ties the output layer to the word
	// embedding (share_embeddings_and_output_weights, true for GPT).
	ShareEmbeddingsAndOutputWeights bool `json:"share_embeddings_and_output_weights"`
	// CalculatePerTokenLoss normalises the loss by the number of tokens of
	// the whole global batch (summed over micro-batches and data-parallel
	// ranks) instead of averaging per micro-batch means
	// (calculate_per_token_loss, false).
	CalculatePerTokenLoss bool `json:"calculate_per_token_loss"`
	// Normalization is the layer norms' kind (normalization): "LayerNorm"
	// (the default, also "") or "RMSNorm" (no bias).
	Normalization string `json:"normalization,omitempty"`
	// LayernormZeroCenteredGamma stores every norm weight as γ−1,
	// initialised to 0, and scales by 1 + w (layernorm_zero_centered_gamma,
	// --apply-layernorm-1p).
	LayernormZeroCenteredGamma bool `json:"layernorm_zero_centered_gamma,omitempty"`
	// QKLayernorm normalises every query and key head over its d channels
	// before attention (qk_layernorm): self_attention.q_layernorm and
	// k_layernorm, [d] each.
	QKLayernorm bool `json:"qk_layernorm,omitempty"`
	// ActivationFunc is the MLP's activation (activation_func): "gelu"
	// (the default, also ""), "openai_gelu", "silu" or "squared_relu".
	ActivationFunc string `json:"activation_func,omitempty"`
	// GatedLinearUnit makes linear_fc1 produce a gate and an up projection
	// [2·ffn]; the MLP computes act(gate)·up (gated_linear_unit; with silu,
	// SwiGLU).
	GatedLinearUnit bool `json:"gated_linear_unit,omitempty"`
	// BiasActivationFusion fuses linear_fc1's bias with the activation
	// (bias_activation_fusion; on by default, as the training flags'
	// --bias-gelu-fusion): for gelu with a bias it selects the tanh form.
	BiasActivationFusion bool `json:"bias_activation_fusion"`
	// AddBiasLinear gives every linear layer a bias (add_bias_linear, true;
	// --disable-bias-linear).
	AddBiasLinear bool `json:"add_bias_linear"`
	// AddQKVBias gives linear_qkv a bias even without AddBiasLinear
	// (add_qkv_bias, --add-qkv-bias).
	AddQKVBias bool `json:"add_qkv_bias,omitempty"`
	// NumQueryGroups is the number of key/value heads g of grouped-query
	// attention (num_query_groups); 0 means one per attention head.
	NumQueryGroups int `json:"num_query_groups,omitempty"`
	// KVChannels is the head dimension d (kv_channels); 0 means
	// hidden_size/num_attention_heads.
	KVChannels int `json:"kv_channels,omitempty"`
	// PositionEmbeddingType is "learned_absolute" (the default, also ""),
	// "rope" or "none" (position_embedding_type).
	PositionEmbeddingType string `json:"position_embedding_type,omitempty"`
	// RotaryBase is RoPE's base θ (rotary_base, 10000).
	RotaryBase int `json:"rotary_base,omitempty"`
	// RotaryPercent is the rotated fraction of each head's channels, in
	// (0, 1] (rotary_percent, 1.0).
	RotaryPercent float64 `json:"rotary_percent,omitempty"`
	// RotaryInterleaved rotates channel pairs (2i, 2i+1) instead of
	// (i, i + d_rot/2) (rotary_interleaved).
	RotaryInterleaved bool `json:"rotary_interleaved,omitempty"`
	// ApplyResidualConnectionPostLayernorm takes each residual from the
	// layer norm's output instead of its input
	// (apply_residual_connection_post_layernorm).
	ApplyResidualConnectionPostLayernorm bool `json:"apply_residual_connection_post_layernorm,omitempty"`

	// CPCommType is how attention crosses the context-parallel ranks
	// (cp_comm_type): "p2p" (the default), "all_gather", "a2a" or
	// "a2a+p2p"; one value for every layer, or one per layer.
	CPCommType []string `json:"cp_comm_type,omitempty"`

	// Recompute holds the activation-recompute settings.
	Recompute

	// MoE holds the mixture-of-experts settings (moe.go).
	MoE
	MLA

	// ---- Pipeline split (pipeline_split.go, pipeline_layout.go) ----

	// PipelineModelParallelLayout places every layer explicitly
	// (pipeline_model_parallel_layout, --pipeline-model-parallel-layout):
	// stages separated by '|', S = pp·vpp of them, stage v·pp + p held by
	// pipeline rank p as its virtual stage v; E embedding, t decoder layer,
	// m MTP layer, L loss; "(…)*N" and "c*N" repeat; commas are cosmetic.
	// E.g. "Et*3|(tt|)*29,m|L". "" means unset. See ParsePipelineLayout.
	// It excludes the four settings below and
	// NumLayersPerVirtualPipelineStage, and sets the number of virtual
	// stages (ResolvePipelineLayout).
	PipelineModelParallelLayout string `json:"pipeline_model_parallel_layout,omitempty"`
	// NumLayersInFirstPipelineStage is the number of decoder layers on the
	// first pipeline rank, the rest split evenly over the middle ranks
	// (num_layers_in_first_pipeline_stage,
	// --decoder-first-pipeline-num-layers). 0 means unset (the reference's
	// None): the first rank holds its even share.
	NumLayersInFirstPipelineStage int `json:"num_layers_in_first_pipeline_stage,omitempty"`
	// NumLayersInLastPipelineStage is the same for the last pipeline rank
	// (num_layers_in_last_pipeline_stage, --decoder-last-pipeline-num-layers).
	NumLayersInLastPipelineStage int `json:"num_layers_in_last_pipeline_stage,omitempty"`
	// AccountForEmbeddingInPipelineSplit counts the embedding as one layer
	// of the even split, so the first chunk holds one decoder layer fewer
	// (account_for_embedding_in_pipeline_split).
	AccountForEmbeddingInPipelineSplit bool `json:"account_for_embedding_in_pipeline_split,omitempty"`
	// AccountForLossInPipelineSplit counts the loss as one layer of the even
	// split, so the last chunk holds one decoder layer fewer
	// (account_for_loss_in_pipeline_split).
	AccountForLossInPipelineSplit bool `json:"account_for_loss_in_pipeline_split,omitempty"`
	// NumLayersPerVirtualPipelineStage n is the number of decoder layers per
	// model chunk of the even split, a training-layer argument
	// (--num-layers-per-virtual-pipeline-stage): it sets
	// virtual_pipeline_model_parallel_size = (num_layers + [account E] +
	// [account L]) / pp / n (ResolvePipelineLayout). 0 means unset. Not with
	// the layout or the uneven first/last split; with
	// virtual_pipeline_model_parallel_size set, the two must agree.
	NumLayersPerVirtualPipelineStage int `json:"num_layers_per_virtual_pipeline_stage,omitempty"`
	// MTPNumLayers is the number of multi-token-prediction depths
	// (mtp_num_layers); 0 means none (the reference's None). A layout's m
	// count must equal it; without a layout they sit with the loss.
	MTPNumLayers int `json:"mtp_num_layers,omitempty"`
	// MTPLossScalingFactor weighs the depths' mean loss in the objective
	// (mtp_loss_scaling_factor, 0.1): see MTPLossScale.
	MTPLossScalingFactor float64 `json:"mtp_loss_scaling_factor"`
}

// DefaultTransformerConfig returns Megatron's defaults for the fields above
// with the sizes left zero.
func DefaultTransformerConfig() TransformerConfig {
	return TransformerConfig{
		ModelParallelConfig:             DefaultModelParallelConfig(),
		LayernormEpsilon:                1e-5,
		MTPLossScalingFactor:            0.1,
		MLA:                             DefaultMLA(),
		HiddenDropout:                   0.1,
		AttentionDropout:                0.1,
		InitMethodStd:                   0.02,
		ShareEmbeddingsAndOutputWeights: true,
		MakeVocabSizeDivisibleBy:        128,
		BiasActivationFusion:            true,
		AddBiasLinear:                   true,
		RotaryBase:                      10000,
		RotaryPercent:                   1,
		MoE:                             DefaultMoE(),
	}
}

// FFN returns the MLP width: FFNHiddenSize, or when unset 4·HiddenSize
// (SwiGLUFFN for SwiGLU, as the training flags set it).
func (c TransformerConfig) FFN() int {
	if c.FFNHiddenSize > 0 {
		return c.FFNHiddenSize
	}
	if c.GatedLinearUnit && c.Activation() == SiLU {
		return SwiGLUFFN(c.HiddenSize)
	}
	return 4 * c.HiddenSize
}

// MaxPositions returns MaxPositionEmbeddings, or SeqLength when unset.
func (c TransformerConfig) MaxPositions() int {
	if c.MaxPositionEmbeddings > 0 {
		return c.MaxPositionEmbeddings
	}
	return c.SeqLength
}

// HeadDim returns the head dimension d: KVChannels, or h/n when unset.
func (c TransformerConfig) HeadDim() int {
	if c.KVChannels > 0 {
		return c.KVChannels
	}
	if c.NumAttentionHeads <= 0 {
		return 0
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// OutputLayerInitStd returns the scaled init std of linear_proj and
// linear_fc2: InitMethodStd/sqrt(2·NumLayers).
func (c TransformerConfig) OutputLayerInitStd() float64 {
	return c.InitMethodStd / math.Sqrt(2*float64(c.NumLayers))
}

// Validate reports every violated rule of the model and its parallel
// configuration at once (nil if none). It reads the config as
// ResolvePipelineLayout resolves it (a layout with 2·pp stages and no
// virtual_pipeline_model_parallel_size is checked as vpp = 2) and does not
// modify c.
func (c TransformerConfig) Validate() error {
	r := c.ResolvePipelineLayout()
	return NewValidationError(append(r.ModelParallelConfig.violations(r.PipelinePlacement), r.modelViolations()...))
}

func (c TransformerConfig) modelViolations() []Violation {
	var vs violationList
	positive := []struct {
		name string
		v    int
	}{
		{"num_layers", c.NumLayers}, {"hidden_size", c.HiddenSize},
		{"num_attention_heads", c.NumAttentionHeads}, {"seq_length", c.SeqLength},
		{"vocab_size", c.VocabSize},
	}
	for _, p := range positive {
		if p.v <= 0 {
			vs.add(fieldList(p.name), "%s is %d: it must be a positive integer; set --%s", p.name, p.v, dashed(p.name))
		}
	}
	if c.FFNHiddenSize < 0 {
		vs.add(fieldList("ffn_hidden_size"), "ffn_hidden_size is %d: it must be positive (or 0 for 4·hidden_size); set --ffn-hidden-size", c.FFNHiddenSize)
	}
	if c.KVChannels == 0 && c.HiddenSize > 0 && c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		vs.add(fieldList("hidden_size", "num_attention_heads"),
			"hidden_size %d is not divisible by num_attention_heads %d (%d mod %d = %d): choose --hidden-size a multiple of --num-attention-heads (or set --kv-channels)",
			c.HiddenSize, c.NumAttentionHeads, c.HiddenSize, c.NumAttentionHeads, c.HiddenSize%c.NumAttentionHeads)
	}
	if c.MaxPositionEmbeddings < 0 || c.LearnedPositions() && c.SeqLength > c.MaxPositions() {
		vs.add(fieldList("seq_length", "max_position_embeddings"),
			"seq_length %d exceeds max_position_embeddings %d: the model has no position embedding beyond %d; raise --max-position-embeddings or lower --seq-length",
			c.SeqLength, c.MaxPositionEmbeddings, c.MaxPositionEmbeddings)
	}
	if tp := c.TensorModelParallelSize; tp > 1 && c.NumAttentionHeads > 0 && c.NumAttentionHeads%tp != 0 {
		vs.add(fieldList("num_attention_heads", "tensor_model_parallel_size"),
			"num_attention_heads %d is not divisible by tensor_model_parallel_size %d: each tensor-parallel rank holds whole heads; choose heads a multiple of the TP size",
			c.NumAttentionHeads, tp)
	}
	if c.HiddenSize > 0 && c.FFNHiddenSize == 0 && c.FFN() <= 0 {
		vs.add(fieldList("ffn_hidden_size", "hidden_size"),
			"ffn_hidden_size is unset and SwiGLU's default for hidden_size %d is 0 (two thirds of 4·h, rounded down to a multiple of 64): set --ffn-hidden-size", c.HiddenSize)
	}
	if tp := c.TensorModelParallelSize; tp > 1 && !c.GatedLinearUnit && c.FFN()%tp != 0 {
		vs.add(fieldList("ffn_hidden_size", "tensor_model_parallel_size"),
			"ffn_hidden_size %d is not divisible by tensor_model_parallel_size %d: linear_fc1 is split by columns across TP ranks; choose --ffn-hidden-size a multiple of the TP size",
			c.FFN(), tp)
	}
	if c.LayernormEpsilon <= 0 {
		vs.add(fieldList("layernorm_epsilon"), "layernorm_epsilon is %g: it must be positive", c.LayernormEpsilon)
	}
	for _, d := range []struct {
		name string
		p    float32
	}{{"hidden_dropout", c.HiddenDropout}, {"attention_dropout", c.AttentionDropout}} {
		if d.p < 0 || d.p >= 1 {
			vs.add(fieldList(d.name), "%s is %g: a dropout probability must lie in [0, 1); set --%s", d.name, d.p, dashed(d.name))
		}
	}
	if c.InitMethodStd <= 0 {
		vs.add(fieldList("init_method_std"), "init_method_std is %g: it must be positive; set --init-method-std", c.InitMethodStd)
	}
	if c.InitMethodXavierUniform && c.NumMoEExperts > 0 && c.AddBiasLinear {
		vs.add(fieldList("init_method_xavier_uniform", "add_bias_linear", "num_moe_experts"), "init_method_xavier_uniform with a MoE router's bias (add_bias_linear, num_moe_experts %d): the router draws its bias [E] from the init method, and Xavier's bound needs a weight of two dimensions (torch's xavier_uniform_ refuses it); add --disable-bias-linear, or drop --init-method-xavier-uniform", c.NumMoEExperts)
	}
	if c.MakeVocabSizeDivisibleBy < 1 {
		vs.add(fieldList("make_vocab_size_divisible_by"), "make_vocab_size_divisible_by is %d: it must be at least 1; set --make-vocab-size-divisible-by", c.MakeVocabSizeDivisibleBy)
	}
	if tp := c.TensorModelParallelSize; c.SequenceParallel && tp > 1 && c.SeqLength > 0 && c.SeqLength%tp != 0 {
		vs.add(fieldList("seq_length", "sequence_parallel", "tensor_model_parallel_size"),
			"seq_length %d is not divisible by tensor_model_parallel_size %d: sequence parallelism splits the sequence across the TP ranks; choose --seq-length a multiple of %d or set sequence_parallel = false (drop --sequence-parallel)",
			c.SeqLength, tp, tp)
	}
	c.modelOptionViolations(&vs)
	c.moeViolations(&vs)
	c.contextViolations(&vs)
	c.recomputeViolations(&vs)
	c.pipelineViolations(&vs)
	c.mtpViolations(&vs)
	c.mlaViolations(&vs)
	return vs
}

func dashed(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '_' {
			b[i] = '-'
		}
	}
	return string(b)
}
