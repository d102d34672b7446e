// Package gptref reads the PyTorch reference fixtures in testdata/gpt_ref*
// (made by tools/torchref/gpt_ref.py) for the tests that compare with them.
//
// Regenerate them with make reference, or one with
//
//	/usr/bin/python3 tools/torchref/gpt_ref.py --config llama --out testdata/gpt_ref_llama
package gptref

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotron/gotron/config"
)

// Config is testdata/gpt_ref/config.json: the fixture's model, data and
// optimizer settings, keyed by Megatron's argument names.
type Config struct {
	NumLayers             int     `json:"num_layers"`
	HiddenSize            int     `json:"hidden_size"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	FFNHiddenSize         int     `json:"ffn_hidden_size"`
	SeqLength             int     `json:"seq_length"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	VocabSize             int     `json:"vocab_size"`
	MicroBatchSize        int     `json:"micro_batch_size"`
	GlobalBatchSize       int     `json:"global_batch_size"`
	Seed                  uint64  `json:"seed"`
	LR                    float64 `json:"lr"`
	AdamBeta1             float64 `json:"adam_beta1"`
	AdamBeta2             float64 `json:"adam_beta2"`
	AdamEps               float64 `json:"adam_eps"`
	WeightDecay           float64 `json:"weight_decay"`
	ClipGrad              float64 `json:"clip_grad"`
	TrainIters            int     `json:"train_iters"`
	InitMethodStd         float64 `json:"init_method_std"`
	LayernormEpsilon      float32 `json:"layernorm_epsilon"`

	// The model options (absent in testdata/gpt_ref: the GPT-2 shape),
	// keyed by Megatron's argument names.
	Normalization                        string  `json:"normalization"`
	ApplyLayernorm1p                     bool    `json:"apply_layernorm_1p"`
	QKLayernorm                          bool    `json:"qk_layernorm"`
	SwiGLU                               bool    `json:"swiglu"`
	SquaredReLU                          bool    `json:"squared_relu"`
	BiasGELUFusion                       *bool   `json:"bias_gelu_fusion"`
	PositionEmbeddingType                string  `json:"position_embedding_type"`
	RotaryBase                           int     `json:"rotary_base"`
	RotaryPercent                        float64 `json:"rotary_percent"`
	RotaryInterleaved                    bool    `json:"rotary_interleaved"`
	GroupQueryAttention                  bool    `json:"group_query_attention"`
	NumQueryGroups                       int     `json:"num_query_groups"`
	KVChannels                           int     `json:"kv_channels"`
	UntieEmbeddingsAndOutputWeights      bool    `json:"untie_embeddings_and_output_weights"`
	AddBiasLinear                        *bool   `json:"add_bias_linear"`
	AddQKVBias                           bool    `json:"add_qkv_bias"`
	ApplyResidualConnectionPostLayernorm bool    `json:"apply_residual_connection_post_layernorm"`

	// The MoE settings (absent: a dense model), by Megatron's argument
	// names; nulls are the reference's None.
	NumExperts                      int      `json:"num_experts"`
	MoELayerFreq                    int      `json:"moe_layer_freq"`
	MoEFFNHiddenSize                int      `json:"moe_ffn_hidden_size"`
	MoERouterTopK                   int      `json:"moe_router_topk"`
	MoERouterScoreFunction          string   `json:"moe_router_score_function"`
	MoERouterPreSoftmax             bool     `json:"moe_router_pre_softmax"`
	MoERouterNumGroups              *int     `json:"moe_router_num_groups"`
	MoERouterGroupTopK              *int     `json:"moe_router_group_topk"`
	MoERouterTopKScalingFactor      *float64 `json:"moe_router_topk_scaling_factor"`
	MoERouterLoadBalancingType      string   `json:"moe_router_load_balancing_type"`
	MoEAuxLossCoeff                 float64  `json:"moe_aux_loss_coeff"`
	MoEZLossCoeff                   *float64 `json:"moe_z_loss_coeff"`
	MoERouterEnableExpertBias       bool     `json:"moe_router_enable_expert_bias"`
	MoERouterBiasUpdateRate         float64  `json:"moe_router_bias_update_rate"`
	MoEExpertCapacityFactor         *float64 `json:"moe_expert_capacity_factor"`
	MoETokenDropPolicy              string   `json:"moe_token_drop_policy"`
	MoEPadExpertInputToCapacity     bool     `json:"moe_pad_expert_input_to_capacity"`
	MoESharedExpertIntermediateSize *int     `json:"moe_shared_expert_intermediate_size"`

	// The MTP settings (absent: none).
	MTPNumLayers         *int     `json:"mtp_num_layers"`
	MTPLossScalingFactor *float64 `json:"mtp_loss_scaling_factor"`

	// The MLA settings (absent: none).
	MultiLatentAttention          bool    `json:"multi_latent_attention"`
	QLoRARank                     *int    `json:"q_lora_rank"`
	KVLoRARank                    int     `json:"kv_lora_rank"`
	QKHeadDim                     int     `json:"qk_head_dim"`
	QKPosEmbHeadDim               int     `json:"qk_pos_emb_head_dim"`
	VHeadDim                      int     `json:"v_head_dim"`
	RopeType                      string  `json:"rope_type"`
	RotaryScalingFactor           float64 `json:"rotary_scaling_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	BetaFast                      float64 `json:"beta_fast"`
	BetaSlow                      float64 `json:"beta_slow"`
	MScale                        float64 `json:"mscale"`
	MScaleAllDim                  float64 `json:"mscale_all_dim"`
}

// Model returns the fixture's model as gotron's TransformerConfig (no
// dropout), with the flags' meaning of the training command line.
func (c Config) Model() config.TransformerConfig {
	m := config.DefaultTransformerConfig()
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads = c.NumLayers, c.HiddenSize, c.NumAttentionHeads
	m.FFNHiddenSize, m.SeqLength, m.MaxPositionEmbeddings = c.FFNHiddenSize, c.SeqLength, c.MaxPositionEmbeddings
	m.VocabSize = c.VocabSize
	m.HiddenDropout, m.AttentionDropout = 0, 0
	if c.InitMethodStd > 0 {
		m.InitMethodStd = c.InitMethodStd
	}
	if c.LayernormEpsilon > 0 {
		m.LayernormEpsilon = c.LayernormEpsilon
	}
	m.Normalization, m.LayernormZeroCenteredGamma, m.QKLayernorm = c.Normalization, c.ApplyLayernorm1p, c.QKLayernorm
	switch {
	case c.SwiGLU:
		m.ActivationFunc, m.GatedLinearUnit = config.SiLU, true
	case c.SquaredReLU:
		m.ActivationFunc = config.SquaredReLU
	}
	if c.BiasGELUFusion != nil {
		m.BiasActivationFusion = *c.BiasGELUFusion
	}
	if c.AddBiasLinear != nil {
		m.AddBiasLinear = *c.AddBiasLinear
	}
	m.AddQKVBias = c.AddQKVBias
	m.PositionEmbeddingType, m.RotaryInterleaved = c.PositionEmbeddingType, c.RotaryInterleaved
	if c.RotaryBase > 0 {
		m.RotaryBase = c.RotaryBase
	}
	if c.RotaryPercent > 0 {
		m.RotaryPercent = c.RotaryPercent
	}
	if c.GroupQueryAttention {
		m.NumQueryGroups = c.NumQueryGroups
	}
	m.KVChannels = c.KVChannels
	m.ShareEmbeddingsAndOutputWeights = !c.UntieEmbeddingsAndOutputWeights
	m.ApplyResidualConnectionPostLayernorm = c.ApplyResidualConnectionPostLayernorm
	if c.NumExperts > 0 {
		c.moe(&m)
	}
	if c.MTPNumLayers != nil {
		m.MTPNumLayers = *c.MTPNumLayers
	}
	if c.MTPLossScalingFactor != nil {
		m.MTPLossScalingFactor = *c.MTPLossScalingFactor
	}
	if c.MultiLatentAttention {
		m.MLA = config.MLA{MultiLatentAttention: true, KVLoRARank: c.KVLoRARank, QKHeadDim: c.QKHeadDim, QKPosEmbHeadDim: c.QKPosEmbHeadDim,
			VHeadDim: c.VHeadDim, RopeType: c.RopeType, RotaryScalingFactor: c.RotaryScalingFactor,
			OriginalMaxPositionEmbeddings: c.OriginalMaxPositionEmbeddings, BetaFast: c.BetaFast, BetaSlow: c.BetaSlow,
			MScale: c.MScale, MScaleAllDim: c.MScaleAllDim}
		if c.QLoRARank != nil {
			m.QLoRARank = *c.QLoRARank
		}
	}
	return m
}

// moe sets the MoE fields of m.
func (c Config) moe(m *config.TransformerConfig) {
	m.NumMoEExperts, m.MoEFFNHiddenSize, m.MoERouterTopK = c.NumExperts, c.MoEFFNHiddenSize, c.MoERouterTopK
	if c.MoELayerFreq > 0 {
		m.MoELayerFreq = []int{c.MoELayerFreq}
	}
	m.MoERouterScoreFunction, m.MoERouterPreSoftmax = c.MoERouterScoreFunction, c.MoERouterPreSoftmax
	if c.MoERouterNumGroups != nil && c.MoERouterGroupTopK != nil {
		m.MoERouterNumGroups, m.MoERouterGroupTopK = *c.MoERouterNumGroups, *c.MoERouterGroupTopK
	}
	if c.MoERouterTopKScalingFactor != nil {
		m.MoERouterTopKScalingFactor = *c.MoERouterTopKScalingFactor
	}
	m.MoERouterLoadBalancingType, m.MoEAuxLossCoeff = c.MoERouterLoadBalancingType, c.MoEAuxLossCoeff
	if c.MoEZLossCoeff != nil {
		m.MoEZLossCoeff = *c.MoEZLossCoeff
	}
	m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = c.MoERouterEnableExpertBias, c.MoERouterBiasUpdateRate
	if c.MoEExpertCapacityFactor != nil {
		m.MoEExpertCapacityFactor = *c.MoEExpertCapacityFactor
	}
	m.MoETokenDropPolicy, m.MoEPadExpertInputToCapacity = c.MoETokenDropPolicy, c.MoEPadExpertInputToCapacity
	if c.MoESharedExpertIntermediateSize != nil {
		m.MoESharedExpertIntermediateSize = *c.MoESharedExpertIntermediateSize
	}
}

// Fixtures are the fixture directories under testdata: the GPT-2 shape
// and the Llama-class option sets.
var Fixtures = []string{"gpt_ref", "gpt_ref_llama", "gpt_ref_variant_a", "gpt_ref_variant_b", "gpt_ref_variant_c", "gpt_ref_moe_a", "gpt_ref_moe_b", "gpt_ref_moe_c", "gpt_ref_mtp_a", "gpt_ref_mtp_b", "gpt_ref_mla_a", "gpt_ref_mla_b"}

// Losses is testdata/gpt_ref/losses.json: each step's loss (before its
// update) and gradient norm (before clipping).
type Losses struct {
	Losses    []float64 `json:"losses"`
	GradNorms []float64 `json:"grad_norms"`
	// MTPLosses are each step's MTP depths' losses (Megatron's logged
	// "mtp_k loss"), absent without MTP.
	MTPLosses [][]float64 `json:"mtp_losses"`
}

// Fixture is the whole fixture directory.
type Fixture struct {
	Dir    string
	Config Config
	Losses Losses
}

// Init and Grads return the paths of the initial weights and of the first
// step's gradients (safetensors, Megatron names).
func (f Fixture) Init() string  { return filepath.Join(f.Dir, "init.safetensors") }
func (f Fixture) Grads() string { return filepath.Join(f.Dir, "grads.safetensors") }

// Load reads the fixture in dir.
func Load(dir string) (Fixture, error) {
	f := Fixture{Dir: dir}
	if err := readJSON(filepath.Join(dir, "config.json"), &f.Config); err != nil {
		return f, err
	}
	if err := readJSON(filepath.Join(dir, "losses.json"), &f.Losses); err != nil {
		return f, err
	}
	return f, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
