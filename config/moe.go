package config

import (
	"math"
	"slices"
)

// MoE holds the mixture-of-experts fields of TransformerConfig, Megatron-Core's
// moe_* settings (docs/SEMANTICS.md § Mixture of experts). NumMoEExperts 0 (the reference's
// None) means a dense model; the other fields apply to the layers MoELayerFreq selects.
type MoE struct {
	// NumMoEExperts is the number of experts E of a MoE layer (num_moe_experts,
	// --num-experts); 0: no MoE layers.
	NumMoEExperts int `json:"num_moe_experts,omitempty"`
	// MoELayerFreq selects the MoE layers (moe_layer_freq): one value N makes every
	// N-th layer MoE starting with layer 0 (1, the default: every layer); a list of
	// num_layers 0/1 values marks each layer (1: MoE).
	MoELayerFreq []int `json:"moe_layer_freq,omitempty"`
	// MoEFFNHiddenSize is each expert's MLP width (moe_ffn_hidden_size); 0: ffn_hidden_size.
	MoEFFNHiddenSize int `json:"moe_ffn_hidden_size,omitempty"`
	// MoESharedExpertIntermediateSize is the width of the shared experts, which every
	// token passes through beside its routed experts
	// (moe_shared_expert_intermediate_size); 0: none.
	MoESharedExpertIntermediateSize int `json:"moe_shared_expert_intermediate_size,omitempty"`
	// MoERouterTopK is the number of experts k each token is routed to (moe_router_topk, 2).
	MoERouterTopK int `json:"moe_router_topk,omitempty"`
	// MoERouterScoreFunction is "softmax" (the default) or "sigmoid"
	// (moe_router_score_function).
	MoERouterScoreFunction string `json:"moe_router_score_function,omitempty"`
	// MoERouterPreSoftmax takes the softmax over all experts before the top-k
	// (moe_router_pre_softmax).
	MoERouterPreSoftmax bool `json:"moe_router_pre_softmax,omitempty"`
	// MoERouterNumGroups and MoERouterGroupTopK limit each token to its best
	// MoERouterGroupTopK of MoERouterNumGroups expert groups (moe_router_num_groups,
	// moe_router_group_topk); 0: no limit.
	MoERouterNumGroups int `json:"moe_router_num_groups,omitempty"`
	MoERouterGroupTopK int `json:"moe_router_group_topk,omitempty"`
	// MoERouterTopKScalingFactor scales the routing probabilities
	// (moe_router_topk_scaling_factor); 0: none.
	MoERouterTopKScalingFactor float64 `json:"moe_router_topk_scaling_factor,omitempty"`
	// MoERouterLoadBalancingType is "aux_loss" (the default), "seq_aux_loss" or "none"
	// (moe_router_load_balancing_type).
	MoERouterLoadBalancingType string `json:"moe_router_load_balancing_type,omitempty"`
	// MoEAuxLossCoeff weighs the load-balancing loss (moe_aux_loss_coeff, 0).
	MoEAuxLossCoeff float64 `json:"moe_aux_loss_coeff,omitempty"`
	// MoEZLossCoeff weighs the router's z loss (moe_z_loss_coeff); 0: none.
	MoEZLossCoeff float64 `json:"moe_z_loss_coeff,omitempty"`
	// MoERouterEnableExpertBias routes by sigmoid scores plus a per-expert bias that
	// finalize_model_grads moves toward balance by MoERouterBiasUpdateRate
	// (moe_router_enable_expert_bias, moe_router_bias_update_rate 1e-3).
	MoERouterEnableExpertBias bool    `json:"moe_router_enable_expert_bias,omitempty"`
	MoERouterBiasUpdateRate   float64 `json:"moe_router_bias_update_rate,omitempty"`
	// MoEExpertCapacityFactor caps each expert's tokens at
	// ⌈T·k/E·factor⌉ (moe_expert_capacity_factor); 0: no capacity, no dropping.
	MoEExpertCapacityFactor float64 `json:"moe_expert_capacity_factor,omitempty"`
	// MoETokenDropPolicy is "probs" (the default) or "position" (moe_token_drop_policy).
	MoETokenDropPolicy string `json:"moe_token_drop_policy,omitempty"`
	// MoEPadExpertInputToCapacity fills every expert to its capacity
	// (moe_pad_expert_input_to_capacity).
	MoEPadExpertInputToCapacity bool `json:"moe_pad_expert_input_to_capacity,omitempty"`
	// MoETokenDispatcherType is "allgather" (the default) or "alltoall"
	// (moe_token_dispatcher_type).
	MoETokenDispatcherType string `json:"moe_token_dispatcher_type,omitempty"`
	// MoEGroupedGEMM runs a rank's experts as one grouped GEMM over their contiguous
	// token slices instead of one MLP after another (moe_grouped_gemm).
	MoEGroupedGEMM bool `json:"moe_grouped_gemm,omitempty"`
}

// DefaultMoE returns the reference's defaults of the MoE fields (no experts).
func DefaultMoE() MoE {
	return MoE{MoERouterTopK: 2, MoERouterScoreFunction: "softmax", MoERouterLoadBalancingType: "aux_loss",
		MoERouterBiasUpdateRate: 1e-3, MoETokenDropPolicy: "probs", MoETokenDispatcherType: "allgather"}
}

// IsMoELayer reports whether decoder layer i (0-based) is a MoE layer.
func (c TransformerConfig) IsMoELayer(i int) bool {
	if c.NumMoEExperts <= 0 {
		return false
	}
	switch f := c.MoELayerFreq; {
	case len(f) == 0:
		return true
	case len(f) == 1:
		return f[0] > 0 && i%f[0] == 0
	default:
		return i < len(f) && f[i] == 1
	}
}

// MoEFFN returns each expert's MLP width: MoEFFNHiddenSize, or FFN().
func (c TransformerConfig) MoEFFN() int {
	if c.MoEFFNHiddenSize > 0 {
		return c.MoEFFNHiddenSize
	}
	return c.FFN()
}

// moeViolations checks the MoE fields as the reference's TransformerConfig
// does: their values (moeOptionViolations) and how they fit the layers and
// the parallel layout.
func (c TransformerConfig) moeViolations(vs *violationList) {
	c.moeOptionViolations(vs)
	m := c.MoE
	if m.NumMoEExperts <= 0 {
		if c.ExpertModelParallelSize > 1 {
			vs.add(fieldList("expert_model_parallel_size", "num_moe_experts"), "expert_model_parallel_size %d needs experts: set --num-experts", c.ExpertModelParallelSize)
		}
		if etp := c.ExpertTensorParallelSize; m.NumMoEExperts == 0 && etp > 0 && etp != max(c.TensorModelParallelSize, 1) {
			vs.add(fieldList("expert_tensor_parallel_size", "num_moe_experts"), "expert_tensor_parallel_size %d splits experts, and num_moe_experts is %d (a dense model): set --num-experts or drop --expert-tensor-parallel-size", etp, m.NumMoEExperts)
		}
		return
	}
	e := m.NumMoEExperts
	if tp := c.TensorModelParallelSize; tp > 1 && !c.SequenceParallel {
		vs.add(fieldList("num_moe_experts", "tensor_model_parallel_size", "sequence_parallel"),
			"num_moe_experts %d with tensor_model_parallel_size %d and sequence_parallel false: MoE and tensor parallelism need sequence parallelism (each tensor-parallel rank routes its own share of the tokens): add --sequence-parallel", e, tp)
	}
	if f := m.MoELayerFreq; len(f) > 1 && len(f) != c.NumLayers {
		vs.add(fieldList("moe_layer_freq", "num_layers"), "moe_layer_freq lists %d values: a pattern needs one 0 (dense) or 1 (MoE) per layer, num_layers %d of them; set --moe-layer-freq", len(f), c.NumLayers)
	}
	if ep := max(c.ExpertModelParallelSize, 1); e%ep != 0 {
		vs.add(fieldList("num_moe_experts", "expert_model_parallel_size"), "num_moe_experts %d is not divisible by expert_model_parallel_size %d: each expert-parallel rank holds an equal share of the experts; choose --num-experts a multiple of %d", e, ep, ep)
	}
	if etp, f := c.EffectiveExpertTensorParallelSize(), c.MoEFFN(); etp > 1 && f > 0 && f%etp != 0 {
		vs.add(fieldList("moe_ffn_hidden_size", "expert_tensor_parallel_size"), "moe_ffn_hidden_size %d is not divisible by expert_tensor_parallel_size %d: each expert's linear_fc1 is split by columns across the expert tensor-parallel ranks; choose --moe-ffn-hidden-size a multiple of %d", f, etp, etp)
	}
	if tp, f := c.TensorModelParallelSize, m.MoESharedExpertIntermediateSize; tp > 1 && f > 0 && f%tp != 0 {
		vs.add(fieldList("moe_shared_expert_intermediate_size", "tensor_model_parallel_size"), "moe_shared_expert_intermediate_size %d is not divisible by tensor_model_parallel_size %d: the shared experts' linear_fc1 is split by columns across the tensor-parallel ranks; choose --moe-shared-expert-intermediate-size a multiple of %d", f, tp, tp)
	}
}

// ValidateMoEOptions reports the violated rules of the MoE fields' values
// alone, leaving out how they fit the layers and the parallel layout
// (Validate checks everything): for a model read back from a record.
func (c TransformerConfig) ValidateMoEOptions() error {
	var vs violationList
	c.moeOptionViolations(&vs)
	return NewValidationError(vs)
}

// moeOptionViolations checks the values of the MoE fields: a dense model's
// are not read.
func (c TransformerConfig) moeOptionViolations(vs *violationList) {
	m := c.MoE
	if m.NumMoEExperts < 0 {
		vs.add(fieldList("num_moe_experts"), "num_moe_experts is %d: it must be positive (or 0 for a dense model); set --num-experts", m.NumMoEExperts)
	}
	if m.NumMoEExperts <= 0 {
		return
	}
	e, k := m.NumMoEExperts, m.MoERouterTopK
	if k < 1 || k > e {
		vs.add(fieldList("moe_router_topk", "num_moe_experts"), "moe_router_topk %d with num_moe_experts %d: each token is routed to between 1 and %d experts; set --moe-router-topk", k, e, e)
	}
	if f := m.MoELayerFreq; len(f) == 1 && f[0] < 1 {
		vs.add(fieldList("moe_layer_freq"), "moe_layer_freq %d: every N-th layer is MoE, N ≥ 1; set --moe-layer-freq", f[0])
	} else if i := slices.IndexFunc(f, func(v int) bool { return v != 0 && v != 1 }); len(f) > 1 && i >= 0 {
		vs.add(fieldList("moe_layer_freq"), "moe_layer_freq marks layer %d with %d: a pattern marks each layer 0 (dense) or 1 (MoE); set --moe-layer-freq", i, f[i])
	}
	if m.MoEFFNHiddenSize < 0 {
		vs.add(fieldList("moe_ffn_hidden_size"), "moe_ffn_hidden_size is %d: it must be positive (or 0 for ffn_hidden_size); set --moe-ffn-hidden-size", m.MoEFFNHiddenSize)
	}
	if m.MoESharedExpertIntermediateSize < 0 {
		vs.add(fieldList("moe_shared_expert_intermediate_size"), "moe_shared_expert_intermediate_size is %d: it must be positive (or 0 for no shared experts); set --moe-shared-expert-intermediate-size", m.MoESharedExpertIntermediateSize)
	}
	if g, gk := m.MoERouterNumGroups, m.MoERouterGroupTopK; g < 0 || gk < 0 {
		vs.add(fieldList("moe_router_num_groups", "moe_router_group_topk"), "moe_router_num_groups %d and moe_router_group_topk %d must not be negative (0: no group-limited routing); set --moe-router-num-groups and --moe-router-group-topk", g, gk)
	}
	switch m.MoERouterScoreFunction {
	case "softmax", "sigmoid":
	default:
		vs.add(fieldList("moe_router_score_function"), "moe_router_score_function %q is not known: choose softmax or sigmoid; set --moe-router-score-function", m.MoERouterScoreFunction)
	}
	if k == 1 && m.MoERouterScoreFunction == "softmax" && !m.MoERouterPreSoftmax {
		vs.add(fieldList("moe_router_topk", "moe_router_pre_softmax"), "moe_router_topk 1 with the softmax after the top-k (moe_router_pre_softmax false) gives every token probability 1 and the router no gradient: add --moe-router-pre-softmax")
	}
	if m.MoERouterEnableExpertBias && m.MoERouterScoreFunction != "sigmoid" {
		vs.add(fieldList("moe_router_enable_expert_bias", "moe_router_score_function"), "moe_router_enable_expert_bias routes by sigmoid scores, and moe_router_score_function is %s: set --moe-router-score-function sigmoid or drop --moe-router-enable-expert-bias", m.MoERouterScoreFunction)
	}
	if r := m.MoERouterBiasUpdateRate; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) || m.MoERouterEnableExpertBias && r == 0 {
		vs.add(fieldList("moe_router_bias_update_rate"), "moe_router_bias_update_rate is %g: it must be a finite number > 0; set --moe-router-bias-update-rate", r)
	}
	if g, gk := m.MoERouterNumGroups, m.MoERouterGroupTopK; (gk > 0 || g > 0) && g >= 0 && gk >= 0 {
		switch {
		case g <= 0 || gk <= 0:
			vs.add(fieldList("moe_router_num_groups", "moe_router_group_topk"), "group-limited routing needs both moe_router_num_groups (%d) and moe_router_group_topk (%d); set --moe-router-num-groups and --moe-router-group-topk", g, gk)
		case e%g != 0 || gk > g || k%gk != 0 || k/gk > e/g:
			vs.add(fieldList("moe_router_num_groups", "moe_router_group_topk", "num_moe_experts", "moe_router_topk"),
				"num_moe_experts %d in moe_router_num_groups %d with moe_router_group_topk %d and moe_router_topk %d: the groups must divide the experts, the chosen groups be at most the groups and divide k, and k/chosen groups be at most a group's experts: choose --moe-router-num-groups a divisor of --num-experts and --moe-router-group-topk a divisor of --moe-router-topk", e, g, gk, k)
		}
	}
	switch m.MoERouterLoadBalancingType {
	case "aux_loss", "seq_aux_loss", "none":
	default:
		vs.add(fieldList("moe_router_load_balancing_type"), "moe_router_load_balancing_type %q is not provided by gotron: choose aux_loss, seq_aux_loss or none; set --moe-router-load-balancing-type", m.MoERouterLoadBalancingType)
	}
	for _, x := range []struct {
		name string
		v    float64
	}{{"moe_aux_loss_coeff", m.MoEAuxLossCoeff}, {"moe_z_loss_coeff", m.MoEZLossCoeff}, {"moe_router_topk_scaling_factor", m.MoERouterTopKScalingFactor}, {"moe_expert_capacity_factor", m.MoEExpertCapacityFactor}} {
		if x.v < 0 || math.IsNaN(x.v) || math.IsInf(x.v, 0) {
			vs.add(fieldList(x.name), "%s is %g: it must be a finite number ≥ 0; set --%s", x.name, x.v, dashed(x.name))
		}
	}
	switch m.MoETokenDropPolicy {
	case "probs", "position":
	default:
		vs.add(fieldList("moe_token_drop_policy"), "moe_token_drop_policy %q is not known: choose probs or position; set --moe-token-drop-policy", m.MoETokenDropPolicy)
	}
	if m.MoEPadExpertInputToCapacity && m.MoEExpertCapacityFactor == 0 {
		vs.add(fieldList("moe_pad_expert_input_to_capacity", "moe_expert_capacity_factor"), "moe_pad_expert_input_to_capacity pads to a capacity and moe_expert_capacity_factor is unset: set --moe-expert-capacity-factor")
	}
	switch m.MoETokenDispatcherType {
	case "allgather", "alltoall":
	default:
		vs.add(fieldList("moe_token_dispatcher_type"), "moe_token_dispatcher_type %q is not provided by gotron: choose allgather or alltoall; set --moe-token-dispatcher-type", m.MoETokenDispatcherType)
	}
}
