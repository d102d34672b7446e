package config

import (
	"math"
	"testing"
)

// llama is validTransformer (4 layers, hidden 64, 4 heads, seq 32) as a
// Llama-class model: RMSNorm, SwiGLU, 2 key/value groups, RoPE, no
// linear biases, untied output layer.
func llama(c *TransformerConfig) {
	c.Normalization, c.ActivationFunc, c.GatedLinearUnit = RMSNormType, SiLU, true
	c.NumQueryGroups, c.PositionEmbeddingType = 2, RoPE
	c.AddBiasLinear, c.BiasActivationFusion, c.ShareEmbeddingsAndOutputWeights = false, false, false
}

// TestModelOptionRules covers every rule of modelOptionViolations and the
// model rules the options change, each message naming its settings, the
// numbers and the flag that fixes it.
func TestModelOptionRules(t *testing.T) {
	runCPCases(t, []cpCase{
		{"defaults (GPT-2) are valid", func(c *TransformerConfig) {}, nil, nil},
		{"a Llama-class model is valid", llama, nil, nil},
		{"every known name is valid", func(c *TransformerConfig) {
			c.Normalization, c.ActivationFunc, c.PositionEmbeddingType = LayerNormType, OpenAIGELU, NoPositions
		}, nil, nil},
		{"squared ReLU and learned positions spelled out are valid", func(c *TransformerConfig) {
			c.ActivationFunc, c.PositionEmbeddingType = SquaredReLU, LearnedAbsolute
		}, nil, nil},

		{"unknown normalization",
			func(c *TransformerConfig) { c.Normalization = "rmsnorm" },
			[][]string{{"normalization"}},
			[]string{`normalization "rmsnorm" is not known`, "--normalization LayerNorm or RMSNorm"}},
		{"unknown activation",
			func(c *TransformerConfig) { c.ActivationFunc = "relu" },
			[][]string{{"activation_func"}},
			[]string{`activation_func "relu" is not known`, "--swiglu", "--squared-relu"}},
		{"unknown position embedding",
			func(c *TransformerConfig) { c.PositionEmbeddingType = "alibi" },
			[][]string{{"position_embedding_type"}},
			[]string{`position_embedding_type "alibi" is not known`, "--position-embedding-type learned_absolute, rope or none"}},

		{"negative query groups",
			func(c *TransformerConfig) { c.NumQueryGroups = -2 },
			[][]string{{"num_query_groups"}},
			[]string{"num_query_groups is -2", "must be positive", "--num-query-groups"}},
		{"heads not divisible by query groups",
			func(c *TransformerConfig) { c.NumQueryGroups = 3 },
			[][]string{{"num_query_groups", "num_attention_heads"}},
			[]string{"num_attention_heads 4 is not divisible by num_query_groups 3", "--num-query-groups a divisor of 4"}},
		{"query groups equal to heads (multi-head attention) are valid",
			func(c *TransformerConfig) { c.NumQueryGroups = 4 }, nil, nil},
		{"one query group (multi-query attention) is valid",
			func(c *TransformerConfig) { c.NumQueryGroups = 1 }, nil, nil},
		{"query groups not divisible by TP",
			func(c *TransformerConfig) { c.NumQueryGroups, c.TensorModelParallelSize = 2, 4 },
			[][]string{{"num_query_groups", "tensor_model_parallel_size"}},
			[]string{"num_query_groups 2 is not divisible by tensor_model_parallel_size 4", "--num-query-groups a multiple of 4", "--tensor-model-parallel-size"}},
		{"query groups a multiple of TP are valid",
			func(c *TransformerConfig) { c.NumQueryGroups, c.TensorModelParallelSize = 2, 2 }, nil, nil},
		{"query groups unset (one per head) are not checked against TP",
			func(c *TransformerConfig) { c.TensorModelParallelSize = 4 }, nil, nil},

		{"negative kv channels",
			func(c *TransformerConfig) { c.KVChannels = -8 },
			[][]string{{"kv_channels"}},
			[]string{"kv_channels is -8", "--kv-channels"}},
		{"absurd kv channels",
			func(c *TransformerConfig) { c.KVChannels = 1 << 60 },
			[][]string{{"kv_channels", "num_attention_heads"}},
			[]string{"beyond any model", "--kv-channels"}},
		{"kv channels lift hidden divisible by heads",
			func(c *TransformerConfig) { c.HiddenSize, c.KVChannels = 60, 16 }, nil, nil},
		{"hidden not divisible by heads names --kv-channels",
			func(c *TransformerConfig) { c.HiddenSize = 60; c.NumAttentionHeads = 8 },
			[][]string{{"hidden_size", "num_attention_heads"}},
			[]string{"hidden_size 60 is not divisible by num_attention_heads 8", "--kv-channels"}},

		{"rotary percent 0",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, 0 },
			[][]string{{"rotary_percent"}},
			[]string{"rotary_percent is 0", "(0, 1]", "--rotary-percent"}},
		{"rotary percent 1.5",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, 1.5 },
			[][]string{{"rotary_percent"}},
			[]string{"rotary_percent is 1.5", "(0, 1]", "--rotary-percent"}},
		{"rotary percent -1",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, -1 },
			[][]string{{"rotary_percent"}},
			[]string{"rotary_percent is -1", "--rotary-percent"}},
		{"rotary percent NaN",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, math.NaN() },
			[][]string{{"rotary_percent"}},
			[]string{"rotary_percent is NaN", "--rotary-percent"}},
		{"rotary percent +Inf",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, math.Inf(1) },
			[][]string{{"rotary_percent"}},
			[]string{"rotary_percent is +Inf", "--rotary-percent"}},
		{"rotary percent rotating an odd channel count",
			// d = 16: int(16·0.3) = 4 is fine; int(16·0.2) = 3 is odd.
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, 0.2 },
			[][]string{{"rotary_percent", "kv_channels"}},
			[]string{"rotary_percent 0.2 of head dimension 16", "rotates 3 channels", "even and at least 2", "--rotary-percent"}},
		{"rotary percent rotating no channel pair",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, 0.1 },
			[][]string{{"rotary_percent", "kv_channels"}},
			[]string{"rotates 1 channels", "--rotary-percent"}},
		{"partial rotary percent rotating whole pairs is valid",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryPercent = RoPE, 0.3 }, nil, nil},
		{"rotary base 0",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryBase = RoPE, 0 },
			[][]string{{"rotary_base"}},
			[]string{"rotary_base is 0", "must be positive", "--rotary-base"}},
		{"rotary base negative",
			func(c *TransformerConfig) { c.PositionEmbeddingType, c.RotaryBase = RoPE, -10 },
			[][]string{{"rotary_base"}},
			[]string{"rotary_base is -10", "--rotary-base"}},
		{"rotary settings are not checked without RoPE",
			func(c *TransformerConfig) { c.RotaryPercent, c.RotaryBase = math.NaN(), 0 }, nil, nil},

		{"SwiGLU FFN not divisible by TP",
			func(c *TransformerConfig) {
				llama(c)
				c.FFNHiddenSize, c.TensorModelParallelSize = 129, 2
			},
			[][]string{{"gated_linear_unit", "ffn_hidden_size", "tensor_model_parallel_size"}},
			[]string{"ffn_hidden_size 129 is not divisible by tensor_model_parallel_size 2", "--swiglu", "--ffn-hidden-size a multiple of 2"}},
		{"SwiGLU's default FFN split over TP is valid",
			func(c *TransformerConfig) { llama(c); c.TensorModelParallelSize = 2 }, nil, nil},
		{"SwiGLU's default FFN of a narrow model is 0",
			func(c *TransformerConfig) { llama(c); c.HiddenSize, c.NumAttentionHeads, c.NumQueryGroups = 16, 2, 0 },
			[][]string{{"ffn_hidden_size", "hidden_size"}},
			[]string{"SwiGLU's default for hidden_size 16 is 0", "set --ffn-hidden-size"}},
		{"plain FFN not divisible by TP",
			func(c *TransformerConfig) { c.FFNHiddenSize, c.TensorModelParallelSize = 130, 4 },
			[][]string{{"ffn_hidden_size", "tensor_model_parallel_size"}},
			[]string{"ffn_hidden_size 130 is not divisible by tensor_model_parallel_size 4", "--ffn-hidden-size a multiple of the TP size"}},

		{"a sequence beyond the learned positions",
			func(c *TransformerConfig) { c.MaxPositionEmbeddings = 16 },
			[][]string{{"seq_length", "max_position_embeddings"}},
			[]string{"seq_length 32 exceeds max_position_embeddings 16", "--max-position-embeddings"}},
		{"RoPE has no position table to exceed",
			func(c *TransformerConfig) { c.MaxPositionEmbeddings, c.PositionEmbeddingType = 16, RoPE }, nil, nil},
		{"no positions have no position table to exceed",
			func(c *TransformerConfig) { c.MaxPositionEmbeddings, c.PositionEmbeddingType = 16, NoPositions }, nil, nil},
	})
}

// TestModelOptionsAllAtOnce: every broken option rule is reported in one
// error.
func TestModelOptionsAllAtOnce(t *testing.T) {
	c := validTransformer()
	c.Normalization, c.ActivationFunc, c.PositionEmbeddingType = "x", "y", RoPE
	c.NumQueryGroups, c.KVChannels, c.RotaryPercent, c.RotaryBase = 3, -1, 2, -1
	want := [][]string{{"normalization"}, {"activation_func"}, {"num_query_groups", "num_attention_heads"}, {"kv_channels"},
		{"rotary_percent"}, {"rotary_base"}}
	checkViolations(t, asValidationError(t, c.Validate()).Violations, want, nil)
}

// TestModelOptionDefaults: the zero values and DefaultTransformerConfig
// name the GPT-2 shape.
func TestModelOptionDefaults(t *testing.T) {
	var zero TransformerConfig
	if zero.NormName() != LayerNormType || zero.RMSNorm() || zero.Activation() != GELU || zero.PositionEmbedding() != LearnedAbsolute ||
		!zero.LearnedPositions() || zero.UsesRoPE() {
		t.Errorf("zero config: norm %s, activation %s, positions %s", zero.NormName(), zero.Activation(), zero.PositionEmbedding())
	}
	d := DefaultTransformerConfig()
	if !d.AddBiasLinear || !d.BiasActivationFusion || d.AddQKVBias || d.GatedLinearUnit || !d.ShareEmbeddingsAndOutputWeights ||
		d.RotaryBase != 10000 || d.RotaryPercent != 1 || d.LayernormEpsilon != 1e-5 {
		t.Errorf("defaults %+v", d)
	}
	r := d
	r.Normalization, r.PositionEmbeddingType = RMSNormType, RoPE
	if !r.RMSNorm() || r.NormName() != RMSNormType || !r.UsesRoPE() || r.LearnedPositions() {
		t.Errorf("RMSNorm/RoPE config: norm %s, positions %s", r.NormName(), r.PositionEmbedding())
	}
	r.PositionEmbeddingType = NoPositions
	if r.UsesRoPE() || r.LearnedPositions() {
		t.Error("no positions: rotates or learns positions")
	}
}

// TestModelOptionWidths covers FFN (SwiGLU's default int(4h·2/3/64)·64),
// HeadDim with and without kv_channels, QueryGroups, QKVWidth,
// AttentionWidth and FC1Width.
func TestModelOptionWidths(t *testing.T) {
	for _, c := range []struct{ h, want int }{
		{64, 128}, {96, 256}, {4096, 10880}, {5120, 13632}, {32, 64}, {48, 128}, {47, 64}, {24, 64}, {23, 0}, {0, 0},
	} {
		if got := SwiGLUFFN(c.h); got != c.want {
			t.Errorf("SwiGLUFFN(%d) = %d, want %d", c.h, got, c.want)
		}
	}
	base := validTransformer() // h 64, 4 heads
	for _, c := range []struct {
		name   string
		change func(*TransformerConfig)
		ffn    int
		fc1    int
	}{
		{"GELU: 4h", func(c *TransformerConfig) {}, 256, 256},
		{"SwiGLU: int(4h·2/3/64)·64, doubled in fc1", func(c *TransformerConfig) { c.ActivationFunc, c.GatedLinearUnit = SiLU, true }, 128, 256},
		{"SwiGLU with the width given", func(c *TransformerConfig) { c.ActivationFunc, c.GatedLinearUnit, c.FFNHiddenSize = SiLU, true, 176 }, 176, 352},
		{"gated GELU keeps 4h (only --swiglu changes the default)", func(c *TransformerConfig) { c.GatedLinearUnit = true }, 256, 512},
		{"SiLU without the gate keeps 4h", func(c *TransformerConfig) { c.ActivationFunc = SiLU }, 256, 256},
		{"squared ReLU: 4h", func(c *TransformerConfig) { c.ActivationFunc = SquaredReLU }, 256, 256},
		{"width given", func(c *TransformerConfig) { c.FFNHiddenSize = 100 }, 100, 100},
	} {
		m := base
		c.change(&m)
		if m.FFN() != c.ffn || m.FC1Width() != c.fc1 {
			t.Errorf("%s: FFN %d, FC1Width %d; want %d, %d", c.name, m.FFN(), m.FC1Width(), c.ffn, c.fc1)
		}
	}

	for _, c := range []struct {
		name                 string
		h, n, g, kv          int
		d, groups, qkv, attn int
	}{
		{"multi-head", 64, 4, 0, 0, 16, 4, 192, 64},
		{"groups equal to heads", 64, 4, 4, 0, 16, 4, 192, 64},
		{"grouped: (n + 2g)·d", 64, 8, 2, 0, 8, 2, 96, 64},
		{"multi-query", 64, 8, 1, 0, 8, 1, 80, 64},
		{"kv_channels sets d", 64, 4, 0, 32, 32, 4, 384, 128},
		{"kv_channels with groups", 60, 6, 2, 16, 16, 2, 160, 96},
		{"no heads", 64, 0, 0, 0, 0, 0, 0, 0},
	} {
		m := base
		m.HiddenSize, m.NumAttentionHeads, m.NumQueryGroups, m.KVChannels = c.h, c.n, c.g, c.kv
		if m.HeadDim() != c.d || m.QueryGroups() != c.groups || m.QKVWidth() != c.qkv || m.AttentionWidth() != c.attn {
			t.Errorf("%s: head dim %d, groups %d, qkv %d, attention %d; want %d, %d, %d, %d",
				c.name, m.HeadDim(), m.QueryGroups(), m.QKVWidth(), m.AttentionWidth(), c.d, c.groups, c.qkv, c.attn)
		}
	}
}

// TestTanhGELU: GELU is in its tanh form with --openai-gelu always, and
// for gelu exactly when the reference's fused kernel computes it
// (bias_activation_fusion with add_bias_linear, or gated: bias-GEGLU);
// never for the other activations.
func TestTanhGELU(t *testing.T) {
	for _, act := range []string{"", GELU, OpenAIGELU, SiLU, SquaredReLU} {
		for _, fusion := range []bool{false, true} {
			for _, bias := range []bool{false, true} {
				for _, glu := range []bool{false, true} {
					c := DefaultTransformerConfig()
					c.ActivationFunc, c.BiasActivationFusion, c.AddBiasLinear, c.GatedLinearUnit = act, fusion, bias, glu
					want := act == OpenAIGELU || (act == "" || act == GELU) && fusion && (bias || glu)
					if got := c.TanhGELU(); got != want {
						t.Errorf("activation %q, fusion %v, bias %v, gated %v: TanhGELU %v, want %v", act, fusion, bias, glu, got, want)
					}
				}
			}
		}
	}
}

// TestQKVBias: linear_qkv has a bias with add_bias_linear or add_qkv_bias.
func TestQKVBias(t *testing.T) {
	for _, c := range []struct{ linear, qkv, want bool }{{false, false, false}, {false, true, true}, {true, false, true}, {true, true, true}} {
		m := DefaultTransformerConfig()
		m.AddBiasLinear, m.AddQKVBias = c.linear, c.qkv
		if m.QKVBias() != c.want {
			t.Errorf("add_bias_linear %v, add_qkv_bias %v: QKVBias %v", c.linear, c.qkv, !c.want)
		}
	}
}

// TestRotaryDim: int(d·rotary_percent), truncated as Megatron truncates;
// the whole head at 1 (and for the unset 0).
func TestRotaryDim(t *testing.T) {
	for _, c := range []struct {
		d    int
		p    float64
		want int
	}{
		{16, 1, 16}, {16, 0.5, 8}, {16, 0.3, 4}, {16, 0.25, 4}, {10, 0.25, 2}, {10, 0.5, 5}, {64, 0.7, 44},
		{128, 0.99, 126}, {16, 0, 16}, {16, 0.01, 0},
	} {
		m := validTransformer()
		m.KVChannels, m.RotaryPercent = c.d, c.p
		if got := m.RotaryDim(); got != c.want {
			t.Errorf("d %d, rotary_percent %g: RotaryDim %d, want %d", c.d, c.p, got, c.want)
		}
	}
}

// TestOptionsDesc names the GPT-2 shape "" and a Llama shape by its options.
func TestOptionsDesc(t *testing.T) {
	c := DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads = 2, 64, 4
	if d := c.OptionsDesc(); d != "" {
		t.Errorf("GPT-2 shape: %q, want \"\"", d)
	}
	c.Normalization, c.ActivationFunc, c.GatedLinearUnit = RMSNormType, SiLU, true
	c.PositionEmbeddingType, c.NumQueryGroups = RoPE, 2
	c.ShareEmbeddingsAndOutputWeights, c.AddBiasLinear = false, false
	if d, want := c.OptionsDesc(), "RMSNorm, SwiGLU, RoPE, 2 query groups, untied embeddings, no biases"; d != want {
		t.Errorf("Llama shape: %q, want %q", d, want)
	}
}
