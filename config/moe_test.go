package config

import (
	"math"
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
	})
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
