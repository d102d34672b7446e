package config

import (
	"fmt"
	"strconv"
)

// OptionDiffs lists how the model options (those Record keeps) of a
// checkpoint's model (saved) and a run's (now) differ, each with its
// Megatron flag ("--normalization LayerNorm in the checkpoint, RMSNorm in
// this run"), comparing the models they build rather than their
// spellings: the number of key/value groups and the head dimension as
// they take effect, the RoPE settings only when both rotate, the bias-GELU
// fusion only where it selects GELU's tanh form, linear_qkv's bias
// whether it comes from --add-qkv-bias or from the linear biases.
func (c TransformerConfig) OptionDiffs(now TransformerConfig) []string {
	saved := c
	d := &optionDiffs{}
	value, given := d.value, d.given
	eps := func(c TransformerConfig) string {
		return strconv.FormatFloat(float64(c.LayernormEpsilon), 'g', -1, 32)
	}
	value("--normalization", saved.NormName(), now.NormName())
	value("--norm-epsilon", eps(saved), eps(now))
	given("--apply-layernorm-1p", saved.LayernormZeroCenteredGamma, now.LayernormZeroCenteredGamma)
	given("--qk-layernorm", saved.QKLayernorm, now.QKLayernorm)
	if s, n := activationFlag(saved), activationFlag(now); s != n {
		d.add(either(s, n))
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
	return append(d.list, moeDiffs(saved, now)...)
}

// moeDiffs is OptionDiffs of the MoE options: the number of experts, and,
// when both models have experts, the options of their MoE layers as they
// take effect: the MoE layers (whatever --moe-layer-freq's spelling), each
// expert's width (--moe-ffn-hidden-size, or --ffn-hidden-size), the expert
// bias's rate only when both route with one, the drop policy and the
// padding only when both drop tokens. The dispatcher and the grouped GEMM
// do not change the numbers and are not compared.
func moeDiffs(saved, now TransformerConfig) []string {
	d := &optionDiffs{}
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
	value, given := d.value, d.given
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if !sameMoELayers(saved, now, max(saved.NumLayers, now.NumLayers)) {
		value("--moe-layer-freq", FormatMoELayerFreq(saved.MoELayerFreq), FormatMoELayerFreq(now.MoELayerFreq))
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
	return d.list
}

// optionDiffs collects the differences OptionDiffs lists.
type optionDiffs struct{ list []string }

func (d *optionDiffs) add(s string) { d.list = append(d.list, s) }

// value notes a flag's differing values.
func (d *optionDiffs) value(flag, s, n string) {
	if s != n {
		d.add(fmt.Sprintf("%s %s in the checkpoint, %s in this run", flag, s, n))
	}
}

// given notes a flag given to one of the two runs only.
func (d *optionDiffs) given(flag string, s, n bool) {
	if s != n {
		d.add(either(flagIf(flag, s), flagIf(flag, n)))
	}
}

// maxComparedLayers bounds the layers sameMoELayers compares: no model
// has more, and a resume is compared before its arguments are validated.
const maxComparedLayers = 1 << 20

// sameMoELayers reports whether a and b make the same of the first n
// layers MoE.
func sameMoELayers(a, b TransformerConfig, n int) bool {
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
func activationFlag(m TransformerConfig) string {
	switch a, glu := m.Activation(), m.GatedLinearUnit; {
	case a == GELU && !glu:
		return ""
	case a == SiLU && glu:
		return "--swiglu"
	case a == SquaredReLU && !glu:
		return "--squared-relu"
	case a == OpenAIGELU && !glu:
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
