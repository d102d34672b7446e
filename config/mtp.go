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

// mtpViolations reports the multi-token-prediction settings gotron cannot
// run: the reference's refusals, then what gotron does not build yet.
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
	if c.PipelineModelParallelSize > 1 && !c.ShareEmbeddingsAndOutputWeights {
		vs.add(fieldList("mtp_num_layers", "share_embeddings_and_output_weights", "pipeline_model_parallel_size"),
			"mtp_num_layers = %d with share_embeddings_and_output_weights false over pipeline_model_parallel_size %d: multi-token prediction with an untied output layer across pipeline stages is not built yet (the MTP stage needs its own copy of the word embedding); tie the embeddings (drop --untie-embeddings-and-output-weights) or train without pipelining",
			c.MTPNumLayers, c.PipelineModelParallelSize)
	}
	chunks, err := c.PipelineChunks()
	if err != nil {
		return // reported by the pipeline rules
	}
	for p, row := range chunks {
		for v, ch := range row {
			if ch.MTPLayers > 0 && !ch.PostProcess {
				vs.add(fieldList("mtp_num_layers", "pipeline_model_parallel_layout"),
					"pipeline_model_parallel_layout puts the mtp_num_layers = %d MTP layers on pipeline rank %d, virtual stage %d, apart from the loss: a standalone MTP stage is not built yet; put every m in the stage of L (say \"...|tmL\")", c.MTPNumLayers, p, v)
			}
		}
	}
}
