package config

import "math"

// World-size arithmetic of initialize_model_parallel
// (docs/SEMANTICS.md § Rank groups): the dense grid is tp × cp × dp × pp and
// the expert grid etp × ep × edp × pp over the same world, so
//
//	dp  = world / (tp·pp·cp)
//	edp = world / (etp·ep·pp)
//
// must both be whole. (The GTP factors of the reference are 1: GTP is not
// provided.)

// DataParallelSize returns dp = world / (tp·pp·cp), or a *ValidationError
// that shows the arithmetic when world is not a multiple of tp·pp·cp (or a
// size is below 1).
func (c ModelParallelConfig) DataParallelSize(world int) (int, error) {
	var vs violationList
	dp := 0
	if checkWorldSize(world, &vs) {
		dp = c.denseDP(world, &vs)
	}
	if err := NewValidationError(vs); err != nil {
		return 0, err
	}
	return dp, nil
}

// ExpertDataParallelSize returns edp = world / (etp·ep·pp), with etp the
// effective expert tensor-parallel size, or a *ValidationError that shows the
// arithmetic when world is not a multiple of etp·ep·pp (or a size is below 1).
func (c ModelParallelConfig) ExpertDataParallelSize(world int) (int, error) {
	var vs violationList
	edp := 0
	if checkWorldSize(world, &vs) {
		edp = c.expertDP(world, &vs)
	}
	if err := NewValidationError(vs); err != nil {
		return 0, err
	}
	return edp, nil
}

// ValidateWorld checks the rules that need the world size (the number of
// ranks): world ≥ 1, world divisible by tp·pp·cp and by etp·ep·pp, and, for
// the distributed optimizer, dp·cp and edp divisible by
// num_distributed_optimizer_instances ("Data parallel size should be
// divisible by partial DistOpt shard factor"). It returns nil or a
// *ValidationError listing every violation.
//
// Call it after mp.Validate and ddp.Validate; it does not repeat their
// rules, and it skips the arithmetic that mp's invalid sizes would make
// meaningless.
func ValidateWorld(world int, mp ModelParallelConfig, ddp DDPConfig) error {
	var vs violationList
	if !checkWorldSize(world, &vs) {
		return NewValidationError(vs)
	}
	dp := mp.denseDP(world, &vs)
	edp := mp.expertDP(world, &vs)
	n := ddp.NumDistributedOptimizerInstances
	if n > 1 {
		tp, pp, cp := mp.TensorModelParallelSize, mp.PipelineModelParallelSize, mp.ContextParallelSize
		if dp > 0 && (dp*cp)%n != 0 {
			vs.add(fieldList("num_distributed_optimizer_instances", "context_parallel_size"),
				"num_distributed_optimizer_instances = %d must divide dp·context_parallel_size = %d·%d = %d "+
					"(dp = world_size/(tp·pp·cp) = %d/(%d·%d·%d)), but %d mod %d = %d: choose a divisor of %d",
				n, dp, cp, dp*cp, world, tp, pp, cp, dp*cp, n, (dp*cp)%n, dp*cp)
		}
		etp, ep := mp.EffectiveExpertTensorParallelSize(), mp.ExpertModelParallelSize
		if edp > 0 && edp%n != 0 {
			vs.add(fieldList("num_distributed_optimizer_instances", "expert_tensor_parallel_size", "expert_model_parallel_size"),
				"num_distributed_optimizer_instances = %d must divide the expert data-parallel size "+
					"edp = world_size/(expert_tensor_parallel_size·expert_model_parallel_size·pipeline_model_parallel_size) = %d/(%d·%d·%d) = %d, "+
					"but %d mod %d = %d: choose a divisor of %d",
				n, world, etp, ep, pp, edp, edp, n, edp%n, edp)
		}
	}
	return NewValidationError(vs)
}

// checkWorldSize reports whether world ≥ 1, adding a violation if not.
func checkWorldSize(world int, vs *violationList) bool {
	if world < 1 {
		vs.add(fieldList("world_size"), "world_size = %d: there must be at least 1 rank", world)
		return false
	}
	return true
}

// denseDP returns world/(tp·pp·cp), or 0 after adding a violation.
func (c ModelParallelConfig) denseDP(world int, vs *violationList) int {
	return splitWorld(world, vs, "sizes",
		[3]string{"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"},
		[3]int{c.TensorModelParallelSize, c.PipelineModelParallelSize, c.ContextParallelSize})
}

// expertDP returns world/(etp·ep·pp), or 0 after adding a violation.
func (c ModelParallelConfig) expertDP(world int, vs *violationList) int {
	return splitWorld(world, vs, "expert sizes (--expert-tensor-parallel-size, --expert-model-parallel-size)",
		[3]string{"expert_tensor_parallel_size", "expert_model_parallel_size", "pipeline_model_parallel_size"},
		[3]int{c.EffectiveExpertTensorParallelSize(), c.ExpertModelParallelSize, c.PipelineModelParallelSize})
}

// splitWorld returns world divided by the product of the three sizes
// named by names, or 0 after adding a violation: a size below 1, a
// product beyond any int, or a world it does not divide. what names the
// sizes in the fix ("sizes", "expert sizes").
func splitWorld(world int, vs *violationList, what string, names [3]string, sizes [3]int) int {
	if sizes[0] < 1 || sizes[1] < 1 || sizes[2] < 1 {
		vs.add(fieldList(names[0], names[1], names[2]),
			"cannot split world_size %d with %s = %d, %s = %d, %s = %d: every size must be ≥ 1",
			world, names[0], sizes[0], names[1], sizes[1], names[2], sizes[2])
		return 0
	}
	fields := fieldList("world_size", names[0], names[1], names[2])
	m, ok := product(sizes[0], sizes[1], sizes[2])
	if !ok {
		vs.add(fields, "world_size %d is not divisible by %s·%s·%s = %d·%d·%d, a product beyond any number of ranks: lower the %s",
			world, names[0], names[1], names[2], sizes[0], sizes[1], sizes[2], what)
		return 0
	}
	if world%m != 0 {
		vs.add(fields, "world_size %d is not divisible by %s·%s·%s = %d·%d·%d = %d (%d mod %d = %d): use a multiple of %d ranks or change the %s",
			world, names[0], names[1], names[2], sizes[0], sizes[1], sizes[2], m, world, m, world%m, m, what)
		return 0
	}
	return world / m
}

// product returns the product of xs, every one at least 1, and true, or
// false when it does not fit in an int: 2³²·2³² would wrap around to 0, and
// dividing by it panic, and other products wrap to a divisor of the world.
func product(xs ...int) (int, bool) {
	p := 1
	for _, x := range xs {
		if x > math.MaxInt/p {
			return 0, false
		}
		p *= x
	}
	return p, true
}
