package config

import "testing"

func validTransformer() TransformerConfig {
	c := DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.SeqLength, c.VocabSize = 4, 64, 4, 32, 256
	return c
}

func TestRecomputeRules(t *testing.T) {
	cases := []struct {
		name   string
		change func(*TransformerConfig)
		want   [][]string
		msg    []string
	}{
		{"full uniform is valid", func(c *TransformerConfig) {
			c.RecomputeGranularity, c.RecomputeMethod, c.RecomputeNumLayers = "full", "uniform", 2
		}, nil, nil},
		{"selective is valid", func(c *TransformerConfig) { c.RecomputeGranularity = "selective" }, nil, nil},
		{"unknown granularity", func(c *TransformerConfig) { c.RecomputeGranularity = "partial" },
			[][]string{{"recompute_granularity"}}, []string{`"partial"`, "full", "selective"}},
		{"full without a method", func(c *TransformerConfig) { c.RecomputeGranularity, c.RecomputeNumLayers = "full", 1 },
			[][]string{{"recompute_granularity", "recompute_method"}}, []string{"--recompute-method"}},
		{"unknown method", func(c *TransformerConfig) {
			c.RecomputeGranularity, c.RecomputeMethod, c.RecomputeNumLayers = "full", "every", 1
		}, [][]string{{"recompute_method"}}, []string{`"every"`}},
		{"full without num layers", func(c *TransformerConfig) { c.RecomputeGranularity, c.RecomputeMethod = "full", "block" },
			[][]string{{"recompute_granularity", "recompute_num_layers"}}, []string{"between 1 and", "= 4"}},
		{"num layers beyond the stage", func(c *TransformerConfig) {
			c.RecomputeGranularity, c.RecomputeMethod, c.RecomputeNumLayers = "full", "block", 5
		}, [][]string{{"recompute_granularity", "recompute_num_layers"}}, []string{"is 5"}},
		{"selective with num layers", func(c *TransformerConfig) { c.RecomputeGranularity, c.RecomputeNumLayers = "selective", 2 },
			[][]string{{"recompute_granularity", "recompute_num_layers"}}, []string{"must be unset"}},
		{"method without granularity", func(c *TransformerConfig) { c.RecomputeMethod = "block" },
			[][]string{{"recompute_granularity", "recompute_method", "recompute_num_layers", "distribute_saved_activations"}}, []string{"--recompute-granularity"}},
		{"distributed with sequence parallel", func(c *TransformerConfig) {
			c.RecomputeGranularity, c.RecomputeMethod, c.RecomputeNumLayers = "full", "uniform", 1
			c.DistributeSavedActivations, c.SequenceParallel, c.TensorModelParallelSize = true, true, 2
		}, [][]string{{"distribute_saved_activations", "sequence_parallel"}}, []string{"must be false"}},
		{"distributed with selective", func(c *TransformerConfig) {
			c.RecomputeGranularity, c.DistributeSavedActivations = "selective", true
		}, [][]string{{"distribute_saved_activations", "recompute_granularity"}}, []string{`"full"`}},
		{"sequence not divisible by tp under SP", func(c *TransformerConfig) {
			c.SequenceParallel, c.TensorModelParallelSize, c.SeqLength = true, 4, 30
		}, [][]string{{"seq_length", "sequence_parallel", "tensor_model_parallel_size"}}, []string{"30", "multiple of 4"}},
		{"vocab multiple below 1", func(c *TransformerConfig) { c.MakeVocabSizeDivisibleBy = 0 },
			[][]string{{"make_vocab_size_divisible_by"}}, []string{"--make-vocab-size-divisible-by"}},
		{"xavier with a router bias", func(c *TransformerConfig) {
			c.InitMethodXavierUniform, c.NumMoEExperts, c.MoERouterTopK, c.AddBiasLinear = true, 4, 2, true
		}, [][]string{{"init_method_xavier_uniform", "add_bias_linear", "num_moe_experts"}}, []string{"--disable-bias-linear", "two dimensions"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validTransformer()
			tc.change(&c)
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			checkViolations(t, asValidationError(t, err).Violations, tc.want, tc.msg)
		})
	}
}

func TestRecomputeLayer(t *testing.T) {
	c := validTransformer()
	c.NumLayers = 5
	c.RecomputeGranularity, c.RecomputeMethod, c.RecomputeNumLayers = "full", "uniform", 2
	var got [][2]any
	for i := 0; i < 5; i++ {
		s, n := c.RecomputeLayer(i, 5)
		got = append(got, [2]any{s, n})
	}
	want := [][2]any{{true, 2}, {false, 0}, {true, 2}, {false, 0}, {true, 1}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("uniform: layer %d gives %v, want %v", i, got[i], want[i])
		}
	}
	c.RecomputeMethod = "block"
	for i := 0; i < 5; i++ {
		s, n := c.RecomputeLayer(i, 5)
		if s != (i < 2) || (s && n != 1) {
			t.Fatalf("block: layer %d gives %v %d", i, s, n)
		}
	}
}

func TestPaddedVocabSize(t *testing.T) {
	for _, tc := range []struct{ v, m, tp, want int }{
		{256, 128, 1, 256}, {256, 128, 2, 256}, {256, 128, 4, 512}, {50257, 128, 1, 50304},
		{50257, 128, 8, 51200}, {100, 1, 3, 102}, {1600, 1, 8, 1600},
	} {
		c := validTransformer()
		c.VocabSize, c.MakeVocabSizeDivisibleBy, c.TensorModelParallelSize = tc.v, tc.m, tc.tp
		if got := c.PaddedVocabSize(); got != tc.want {
			t.Errorf("vocab %d, multiple %d, tp %d: padded %d, want %d", tc.v, tc.m, tc.tp, got, tc.want)
		}
	}
}
