package config

import (
	"math"
	"strings"
	"testing"
)

// withExperts makes validTransformer a MoE model of 8 experts.
func withExperts(c *TransformerConfig) { c.NumMoEExperts = 8 }

// TestMoERules covers every rule of moeViolations, each message naming
// its settings and the flag that fixes it.
func TestMoERules(t *testing.T) {
	moe := func(f func(c *TransformerConfig)) func(c *TransformerConfig) {
		return func(c *TransformerConfig) { withExperts(c); f(c) }
	}
	runCPCases(t, []cpCase{
		{"a dense model ignores the MoE fields", func(c *TransformerConfig) { c.MoERouterTopK, c.MoERouterScoreFunction = 99, "x" }, nil, nil},
		{"8 experts, top-2 softmax are valid", withExperts, nil, nil},
		{"negative experts", func(c *TransformerConfig) { c.NumMoEExperts = -1 },
			[][]string{{"num_moe_experts"}}, []string{"num_moe_experts is -1", "--num-experts"}},
		{"top-k beyond the experts", moe(func(c *TransformerConfig) { c.MoERouterTopK = 9 }),
			[][]string{{"moe_router_topk", "num_moe_experts"}}, []string{"moe_router_topk 9", "--moe-router-topk"}},
		{"top-1 softmax after the top-k", moe(func(c *TransformerConfig) { c.MoERouterTopK = 1 }),
			[][]string{{"moe_router_topk", "moe_router_pre_softmax"}}, []string{"--moe-router-pre-softmax"}},
		{"top-1 pre-softmax is valid", moe(func(c *TransformerConfig) { c.MoERouterTopK, c.MoERouterPreSoftmax = 1, true }), nil, nil},
		{"unknown score function", moe(func(c *TransformerConfig) { c.MoERouterScoreFunction = "relu" }),
			[][]string{{"moe_router_score_function"}}, []string{`"relu" is not known`, "--moe-router-score-function"}},
		{"expert bias with softmax", moe(func(c *TransformerConfig) { c.MoERouterEnableExpertBias = true }),
			[][]string{{"moe_router_enable_expert_bias", "moe_router_score_function"}}, []string{"--moe-router-score-function sigmoid"}},
		{"expert bias rate 0", moe(func(c *TransformerConfig) {
			c.MoERouterScoreFunction, c.MoERouterEnableExpertBias, c.MoERouterBiasUpdateRate = "sigmoid", true, 0
		}), [][]string{{"moe_router_bias_update_rate"}}, []string{"--moe-router-bias-update-rate"}},
		{"groups not dividing the experts", moe(func(c *TransformerConfig) { c.MoERouterNumGroups, c.MoERouterGroupTopK = 3, 1 }),
			[][]string{{"moe_router_num_groups", "moe_router_group_topk", "num_moe_experts", "moe_router_topk"}}, []string{"the groups must divide the experts"}},
		{"group top-k without groups", moe(func(c *TransformerConfig) { c.MoERouterGroupTopK = 2 }),
			[][]string{{"moe_router_num_groups", "moe_router_group_topk"}}, []string{"--moe-router-num-groups"}},
		{"4 groups, 2 chosen are valid", moe(func(c *TransformerConfig) { c.MoERouterNumGroups, c.MoERouterGroupTopK = 4, 2 }), nil, nil},
		{"unknown balancing type", moe(func(c *TransformerConfig) { c.MoERouterLoadBalancingType = "sinkhorn" }),
			[][]string{{"moe_router_load_balancing_type"}}, []string{`"sinkhorn" is not provided`, "--moe-router-load-balancing-type"}},
		{"NaN aux coefficient", moe(func(c *TransformerConfig) { c.MoEAuxLossCoeff = math.NaN() }),
			[][]string{{"moe_aux_loss_coeff"}}, []string{"--moe-aux-loss-coeff"}},
		{"negative capacity", moe(func(c *TransformerConfig) { c.MoEExpertCapacityFactor = -1 }),
			[][]string{{"moe_expert_capacity_factor"}}, []string{"--moe-expert-capacity-factor"}},
		{"padding without capacity", moe(func(c *TransformerConfig) { c.MoEPadExpertInputToCapacity = true }),
			[][]string{{"moe_pad_expert_input_to_capacity", "moe_expert_capacity_factor"}}, []string{"--moe-expert-capacity-factor"}},
		{"unknown drop policy", moe(func(c *TransformerConfig) { c.MoETokenDropPolicy = "random" }),
			[][]string{{"moe_token_drop_policy"}}, []string{"--moe-token-drop-policy"}},
		{"unknown dispatcher", moe(func(c *TransformerConfig) { c.MoETokenDispatcherType = "flex" }),
			[][]string{{"moe_token_dispatcher_type"}}, []string{`"flex" is not provided`}},
		{"layer freq 0", moe(func(c *TransformerConfig) { c.MoELayerFreq = []int{0} }),
			[][]string{{"moe_layer_freq"}}, []string{"--moe-layer-freq"}},
		{"a layer pattern of the wrong length", moe(func(c *TransformerConfig) { c.MoELayerFreq = []int{1, 0, 1} }),
			[][]string{{"moe_layer_freq", "num_layers"}}, []string{"lists 3 values", "num_layers 4"}},
		{"experts not divisible by EP", moe(func(c *TransformerConfig) { c.NumMoEExperts, c.ExpertModelParallelSize = 6, 4 }),
			[][]string{{"num_moe_experts", "expert_model_parallel_size"}}, []string{"num_moe_experts 6 is not divisible by expert_model_parallel_size 4"}},
		{"MoE with TP and without SP", moe(func(c *TransformerConfig) { c.TensorModelParallelSize = 2 }),
			[][]string{{"num_moe_experts", "tensor_model_parallel_size", "sequence_parallel"}}, []string{"need sequence parallelism", "add --sequence-parallel"}},
		{"MoE with TP and SP is valid", moe(func(c *TransformerConfig) { c.TensorModelParallelSize, c.SequenceParallel = 2, true }), nil, nil},
		{"a dense model with TP needs no SP", func(c *TransformerConfig) { c.TensorModelParallelSize = 2 }, nil, nil},
		{"expert TP in a dense model", func(c *TransformerConfig) { c.ExpertTensorParallelSize = 2 },
			[][]string{{"expert_tensor_parallel_size", "num_moe_experts"}}, []string{"set --num-experts or drop --expert-tensor-parallel-size"}},
		{"expert TP equal to TP in a dense model is valid", func(c *TransformerConfig) { c.TensorModelParallelSize, c.ExpertTensorParallelSize = 2, 2 }, nil, nil},
		{"expert width not divisible by expert TP", moe(func(c *TransformerConfig) { c.MoEFFNHiddenSize, c.ExpertTensorParallelSize = 30, 4 }),
			[][]string{{"moe_ffn_hidden_size", "expert_tensor_parallel_size"}}, []string{"moe_ffn_hidden_size 30 is not divisible by expert_tensor_parallel_size 4", "--moe-ffn-hidden-size a multiple of 4"}},
		{"the default expert width is the FFN's, split by the TP size", moe(func(c *TransformerConfig) {
			c.FFNHiddenSize, c.TensorModelParallelSize, c.SequenceParallel = 130, 4, true
		}), [][]string{{"moe_ffn_hidden_size", "expert_tensor_parallel_size"}, {"ffn_hidden_size", "tensor_model_parallel_size"}},
			[]string{"moe_ffn_hidden_size 130 is not divisible by expert_tensor_parallel_size 4"}},
		{"shared experts not divisible by TP", moe(func(c *TransformerConfig) {
			c.MoESharedExpertIntermediateSize, c.TensorModelParallelSize, c.SequenceParallel, c.ExpertTensorParallelSize = 33, 2, true, 1
		}), [][]string{{"moe_shared_expert_intermediate_size", "tensor_model_parallel_size"}}, []string{"--moe-shared-expert-intermediate-size a multiple of 2"}},
		{"negative expert width", moe(func(c *TransformerConfig) { c.MoEFFNHiddenSize = -3 }),
			[][]string{{"moe_ffn_hidden_size"}}, []string{"moe_ffn_hidden_size is -3", "--moe-ffn-hidden-size"}},
		{"negative shared width", moe(func(c *TransformerConfig) { c.MoESharedExpertIntermediateSize = -1 }),
			[][]string{{"moe_shared_expert_intermediate_size"}}, []string{"--moe-shared-expert-intermediate-size"}},
		{"negative groups", moe(func(c *TransformerConfig) { c.MoERouterNumGroups, c.MoERouterGroupTopK = -2, 1 }),
			[][]string{{"moe_router_num_groups", "moe_router_group_topk"}}, []string{"must not be negative", "--moe-router-num-groups"}},
		{"NaN bias rate without the bias", moe(func(c *TransformerConfig) { c.MoERouterBiasUpdateRate = math.NaN() }),
			[][]string{{"moe_router_bias_update_rate"}}, []string{"is NaN", "--moe-router-bias-update-rate"}},
		{"negative bias rate", moe(func(c *TransformerConfig) {
			c.MoERouterScoreFunction, c.MoERouterEnableExpertBias, c.MoERouterBiasUpdateRate = "sigmoid", true, -1e-3
		}), [][]string{{"moe_router_bias_update_rate"}}, []string{"finite number > 0"}},
		{"infinite z loss", moe(func(c *TransformerConfig) { c.MoEZLossCoeff = math.Inf(1) }),
			[][]string{{"moe_z_loss_coeff"}}, []string{"moe_z_loss_coeff is +Inf", "--moe-z-loss-coeff"}},
		{"a pattern value other than 0 and 1", moe(func(c *TransformerConfig) { c.MoELayerFreq = []int{1, 0, 2, 0} }),
			[][]string{{"moe_layer_freq"}}, []string{"marks layer 2 with 2", "--moe-layer-freq"}},
		{"a pattern of one per layer is valid", moe(func(c *TransformerConfig) { c.MoELayerFreq = []int{1, 0, 0, 1} }), nil, nil},
	})
}

// TestValidateMoEOptions: a record's MoE options are checked alone, not
// against the layers or the layout they will run under.
func TestValidateMoEOptions(t *testing.T) {
	c := validTransformer()
	c.NumMoEExperts, c.TensorModelParallelSize, c.MoELayerFreq = 8, 2, []int{1, 0}
	if err := c.ValidateMoEOptions(); err != nil {
		t.Errorf("options that are valid alone: %v", err)
	}
	if c.Validate() == nil {
		t.Errorf("Validate accepts a 2-value pattern for 4 layers under TP without SP")
	}
	c.MoERouterScoreFunction = "relu"
	if err := c.ValidateMoEOptions(); err == nil || !strings.Contains(err.Error(), `"relu" is not known`) {
		t.Errorf("an unknown score function: %v", err)
	}
}

// TestIsMoELayer: one frequency N marks every N-th layer from layer 0; a
// pattern marks each layer; a dense model has none.
func TestIsMoELayer(t *testing.T) {
	c := validTransformer()
	for _, tc := range []struct {
		experts int
		freq    []int
		want    []bool
	}{
		{0, nil, []bool{false, false, false, false}},
		{4, nil, []bool{true, true, true, true}},
		{4, []int{2}, []bool{true, false, true, false}},
		{4, []int{0, 1, 1, 0}, []bool{false, true, true, false}},
	} {
		c.NumMoEExperts, c.MoELayerFreq = tc.experts, tc.freq
		for i, w := range tc.want {
			if c.IsMoELayer(i) != w {
				t.Errorf("experts %d, freq %v: layer %d MoE = %v, want %v", tc.experts, tc.freq, i, !w, w)
			}
		}
	}
}
