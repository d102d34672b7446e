package config

import "math"

// MTPLossScale is the weight of each multi-token-prediction depth's loss
// in the training objective: mtp_loss_scaling_factor / mtp_num_layers (the
// reference's process_mtp_loss: the depths' losses are averaged, then
// scaled).
func (c TransformerConfig) MTPLossScale() float64 {
	if c.MTPNumLayers <= 0 {
		return 0
	}
	return c.MTPLossScalingFactor / float64(c.MTPNumLayers)
}

// mtpViolations reports the multi-token-prediction settings gotron
// refuses, as the reference refuses them (the layout's rules for m are
// the layout's own, PipelineLayout.Validate).
func (c TransformerConfig) mtpViolations(vs *violationList) {
	if c.MTPNumLayers <= 0 {
		return
	}
	if f := c.MTPLossScalingFactor; math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		vs.add(fieldList("mtp_loss_scaling_factor"), "mtp_loss_scaling_factor is %g: it must be a finite number ≥ 0; set --mtp-loss-scaling-factor (default 0.1)", f)
	}
	if c.LearnedPositions() {
		vs.add(fieldList("mtp_num_layers", "position_embedding_type"),
			"mtp_num_layers = %d with position_embedding_type learned_absolute: multi-token prediction is refused there, as the reference refuses it (its depths embed the rolled tokens without positions); use --position-embedding-type rope or none, or drop --mtp-num-layers", c.MTPNumLayers)
	}
}
