package config

// ValidateTogether validates mp and ddp and the rules that involve both (and
// the transformer config's calculate_per_token_loss, passed in as
// calculatePerTokenLoss): it returns nil or one *ValidationError listing
// every violation of mp, of ddp and of their combination. The combined rules
// are:
//
//   - calculate_per_token_loss excludes average_in_collective (the
//     reference's DDP wrapper: "Cannot average in collective when
//     calculating per-token loss!"): per-token scaling divides the summed
//     gradients by the token count in finalize, so the collective must sum.
//   - align_param_gather needs the interleaved schedule, which is what
//     dispatches the aligned all-gathers (the reference's training layer
//     silently turns it off otherwise; gotron refuses instead).
func ValidateTogether(mp ModelParallelConfig, ddp DDPConfig, calculatePerTokenLoss bool) error {
	vs := violationList(mp.Violations())
	vs = append(vs, ddp.Violations()...)
	if calculatePerTokenLoss && ddp.AverageInCollective {
		vs.add(fieldList("calculate_per_token_loss", "average_in_collective"),
			"calculate_per_token_loss = true cannot be used with average_in_collective = true: "+
				"per-token loss divides the summed gradients by the token count, so the collective must sum; turn average_in_collective off")
	}
	if ddp.AlignParamGather && !mp.Interleaved() {
		vs.add(fieldList("align_param_gather", "virtual_pipeline_model_parallel_size"),
			"align_param_gather = true needs the interleaved schedule, which launches the aligned all-gathers, "+
				"but virtual_pipeline_model_parallel_size is unset (0): set it, or turn align_param_gather off")
	}
	return NewValidationError(vs)
}

// ValidateMicrobatches checks the rules of the interleaved schedule that need
// the number of microbatches per iteration M (docs/SEMANTICS.md § Interleaved
// schedule table), with G the effective microbatch_group_size_per_vp_stage
// and P the pipeline size:
//
//	M ≥ 1
//	P ≤ G ≤ M                         (interleaved only)
//	M mod G = 0 or M mod G ≥ P        (interleaved only: a smaller remainder
//	                                   group leaves dependency bubbles)
//
// It returns nil or a *ValidationError. Call it after Validate.
func (c ModelParallelConfig) ValidateMicrobatches(numMicrobatches int) error {
	var vs violationList
	m := numMicrobatches
	if m < 1 {
		vs.add(fieldList("num_microbatches"), "num_microbatches = %d: there must be at least 1 microbatch per iteration", m)
		return NewValidationError(vs)
	}
	p := c.PipelineModelParallelSize
	if !c.Interleaved() || p < 2 {
		return nil
	}
	g := c.EffectiveMicrobatchGroupSize()
	if g < p || g > m {
		vs.add(fieldList("microbatch_group_size_per_vp_stage", "pipeline_model_parallel_size", "num_microbatches"),
			"microbatch_group_size_per_vp_stage = %d must lie in [pipeline_model_parallel_size, num_microbatches] = [%d, %d] for the interleaved schedule: "+
				"choose a group size in that range, or more microbatches",
			g, p, m)
		return NewValidationError(vs)
	}
	if r := m % g; r > 0 && r < p {
		vs.add(fieldList("num_microbatches", "microbatch_group_size_per_vp_stage", "pipeline_model_parallel_size"),
			"num_microbatches mod microbatch_group_size_per_vp_stage = %d mod %d = %d must be 0 or ≥ pipeline_model_parallel_size = %d, "+
				"else the last group leaves dependency bubbles in the interleaved schedule: make num_microbatches a multiple of %d, or leave a remainder ≥ %d",
			m, g, r, p, g, p)
	}
	return NewValidationError(vs)
}
