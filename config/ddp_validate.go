package config

import (
	"slices"
)

// Validate checks every rule of the reference's
// DistributedDataParallelConfig.__post_init__ (docs/SEMANTICS.md
// § DistributedDataParallelConfig checks), the asserts of its DDP wrapper and
// gradient buffers that need only this config, the training layer's
// overlap_param_gather rules, and the settings the CPU backend does not
// provide. It returns nil or a *ValidationError listing every violation.
//
// Rule 3 of the reference (nccl_ub with expandable CUDA segments) is covered
// by rejecting nccl_ub. Rules that involve the model-parallel config are in
// ValidateTogether; rules that need the world size are in ValidateWorld.
func (c DDPConfig) Validate() error { return NewValidationError(c.Violations()) }

// Violations returns what Validate reports, as a slice (nil when c is valid).
func (c DDPConfig) Violations() []Violation {
	var vs violationList

	// __post_init__ rule 1.
	if c.MegatronFSDPVersion != 1 && c.MegatronFSDPVersion != 2 {
		vs.add(fieldList("megatron_fsdp_version"),
			"megatron_fsdp_version = %d: must be either 1 or 2 (and only version 1 is provided: keep 1)", c.MegatronFSDPVersion)
	}
	// Rule 2.
	if c.ReuseGradBufForMXFP8ParamAG && !c.FP8ParamGather {
		vs.add(fieldList("reuse_grad_buf_for_mxfp8_param_ag", "fp8_param_gather"),
			"reuse_grad_buf_for_mxfp8_param_ag = true needs fp8_param_gather = true: reuse the gradient buffer only when keeping parameters in MXFP8")
	}
	// Rule 4.
	if n := len(c.ParamNamePatternsForFP32LocalAccumulation); n > 0 && c.GradReduceInFP32 {
		vs.add(fieldList("param_name_patterns_for_fp32_local_accumulation", "grad_reduce_in_fp32"),
			"param_name_patterns_for_fp32_local_accumulation has %d pattern(s), but grad_reduce_in_fp32 = true already keeps every main_grad in float32: "+
				"remove the patterns or turn grad_reduce_in_fp32 off", n)
	}
	// Rule 5.
	if c.NumBuckets != 0 && c.BucketSize != 0 {
		vs.add(fieldList("num_buckets", "bucket_size"),
			"num_buckets = %d and bucket_size = %d are both set: specify only one (leave the other 0)", c.NumBuckets, c.BucketSize)
	}
	if c.NumBuckets < 0 {
		vs.add(fieldList("num_buckets"), "num_buckets = %d: must be greater than 0, or 0 (unset)", c.NumBuckets)
	}
	if c.BucketSize < 0 {
		vs.add(fieldList("bucket_size"),
			"bucket_size = %d elements: must be greater than 0, or 0 (unset) for the default max(40000000, 1000000·dp·cp)", c.BucketSize)
	}

	// DDP wrapper and buffers.
	if c.NumDistributedOptimizerInstances < 1 {
		vs.add(fieldList("num_distributed_optimizer_instances"),
			"num_distributed_optimizer_instances = %d: must be ≥ 1 (1 shards the optimizer over the whole dp·cp group)",
			c.NumDistributedOptimizerInstances)
	}
	if c.NumDistributedOptimizerInstances > 1 && !c.UseDistributedOptimizer {
		vs.add(fieldList("num_distributed_optimizer_instances", "use_distributed_optimizer"),
			"num_distributed_optimizer_instances = %d (partial DistOpt) needs use_distributed_optimizer = true: turn it on or set the instances to 1",
			c.NumDistributedOptimizerInstances)
	}
	if c.ReduceScatterWithFP32Accumulation && c.NumDistributedOptimizerInstances > 1 {
		vs.add(fieldList("reduce_scatter_with_fp32_accumulation", "num_distributed_optimizer_instances"),
			"reduce_scatter_with_fp32_accumulation = true is not supported with num_distributed_optimizer_instances = %d > 1: "+
				"turn one of them off", c.NumDistributedOptimizerInstances)
	}

	// Training layer (megatron/training/arguments.py).
	if c.ReduceScatterWithFP32Accumulation && c.AverageInCollective {
		vs.add(fieldList("reduce_scatter_with_fp32_accumulation", "average_in_collective"),
			"reduce_scatter_with_fp32_accumulation = true sums (its float32 accumulation supports only ReduceOp SUM), but average_in_collective = true asks the collective to average: "+
				"turn one of them off")
	}

	if c.OverlapParamGather && !c.UseDistributedOptimizer && !c.MegatronFSDP() {
		vs.add(fieldList("overlap_param_gather", "use_distributed_optimizer"),
			"overlap_param_gather = true needs use_distributed_optimizer = true or use_megatron_fsdp = true (only they gather parameters): "+
				"turn one on or overlap_param_gather off")
	}
	if c.OverlapParamGather && !c.OverlapGradReduce {
		vs.add(fieldList("overlap_param_gather", "overlap_grad_reduce"),
			"overlap_param_gather = true needs overlap_grad_reduce = true: turn overlap_grad_reduce on or overlap_param_gather off")
	}

	c.checkFSDP(&vs)
	c.checkNotProvided(&vs)
	return vs
}

// checkFSDP checks Megatron-FSDP's settings: the strategies' names, what
// needs use_megatron_fsdp, the reference's hybrid-sharding rule, and the
// settings gotron's FSDP refuses to combine with rather than ignore (the
// reference ignores grad_reduce_in_fp32's neighbours under FSDP).
func (c DDPConfig) checkFSDP(vs *violationList) {
	strategies := []string{NoShard, ShardOptim, ShardOptimGrads, ShardOptimGradsParams}
	s := c.DataParallelShardingStrategy
	if !slices.Contains(strategies, s) {
		vs.add(fieldList("data_parallel_sharding_strategy"),
			"data_parallel_sharding_strategy = %q: must be one of %q", s, strategies)
	} else if s != NoShard && !c.MegatronFSDP() {
		vs.add(fieldList("data_parallel_sharding_strategy", "use_megatron_fsdp"),
			"data_parallel_sharding_strategy = %q needs use_megatron_fsdp = true: turn it on (--use-megatron-fsdp), or use the distributed optimizer (--use-distributed-optimizer) for sharded optimizer state alone", s)
	}
	if o := c.OuterDPShardingStrategy; o != NoShard && o != ShardOptim {
		vs.add(fieldList("outer_dp_sharding_strategy"),
			"outer_dp_sharding_strategy = %q: must be %q or %q", o, NoShard, ShardOptim)
	} else if o != NoShard && s != ShardOptimGradsParams {
		vs.add(fieldList("outer_dp_sharding_strategy", "data_parallel_sharding_strategy"),
			"outer_dp_sharding_strategy = %q needs data_parallel_sharding_strategy = %q inside each replica (the reference's rule), not %q", o, ShardOptimGradsParams, s)
	}
	if c.OuterDPShardingStrategy == ShardOptim && c.NumDistributedOptimizerInstances < 2 {
		vs.add(fieldList("outer_dp_sharding_strategy", "num_distributed_optimizer_instances"),
			"outer_dp_sharding_strategy = %q shards across instances, but num_distributed_optimizer_instances = %d: give 2 or more (hybrid sharding) or leave the outer strategy %q",
			c.OuterDPShardingStrategy, c.NumDistributedOptimizerInstances, NoShard)
	}
	if n := c.SuggestedCommunicationUnitSize; n < 0 {
		vs.add(fieldList("suggested_communication_unit_size"),
			"suggested_communication_unit_size = %d elements: must be greater than 0, or 0 (unset)", n)
	} else if n > 0 && !c.ShardsGradients() {
		vs.add(fieldList("suggested_communication_unit_size", "data_parallel_sharding_strategy"),
			"suggested_communication_unit_size = %d sizes Megatron-FSDP's per-layer gathers and reductions, which only optim_grads and optim_grads_params make (use_megatron_fsdp = %v, data_parallel_sharding_strategy = %q): choose one of them or leave the size 0",
			n, c.MegatronFSDP(), s)
	}
	if !c.ShardsGradients() {
		return
	}
	if c.ReduceScatterWithFP32Accumulation {
		vs.add(fieldList("reduce_scatter_with_fp32_accumulation", "data_parallel_sharding_strategy"),
			"reduce_scatter_with_fp32_accumulation = true with data_parallel_sharding_strategy = %q: Megatron-FSDP reduce-scatters in the gradients' type and accumulates the shards in float32; turn it off", s)
	}
	if n := len(c.ParamNamePatternsForFP32LocalAccumulation); n > 0 {
		vs.add(fieldList("param_name_patterns_for_fp32_local_accumulation", "data_parallel_sharding_strategy"),
			"param_name_patterns_for_fp32_local_accumulation has %d pattern(s) with data_parallel_sharding_strategy = %q, whose gradient shards accumulate in float32 already: leave it empty", n, s)
	}
}

// checkNotProvided reports FSDP, userbuffer and low-precision-gather settings
// with non-default values.
func (c DDPConfig) checkNotProvided(vs *violationList) {
	const fsdp = "Megatron-FSDP"
	reportNotProvided(vs, []notProvided{
		{"fp8_param_gather", c.FP8ParamGather, true, false, "fp8 parameter all-gather"},
		{"fp4_param_gather", c.FP4ParamGather, true, false, "fp4 parameter all-gather"},
		{"reuse_grad_buf_for_mxfp8_param_ag", c.ReuseGradBufForMXFP8ParamAG, true, false, "MXFP8 parameter all-gather"},
		{"megatron_fsdp_version", c.MegatronFSDPVersion == 2, 2, 1, fsdp + " version 2"},
		{"keep_fp8_transpose_cache", c.KeepFP8TransposeCache, true, false, fsdp + " fp8 transpose caching"},
		{"nccl_ub", c.NCCLUB, true, false, "NCCL userbuffer registration"},
		{"fsdp_double_buffer", c.FSDPDoubleBuffer, true, false, fsdp + " double buffers"},
		{"fsdp_db_use_persist_buf_on_alloc_fail", c.FSDPDBUsePersistBufOnAllocFail, true, false, fsdp + " persistent buffers"},
		{"fsdp_all_gather_in_start_param_sync", !c.FSDPAllGatherInStartParamSync, false, true, fsdp + " parameter sync"},
		{"disable_symmetric_registration", c.DisableSymmetricRegistration, true, false, "NCCL userbuffer registration"},
		{"fsdp_manual_registration", c.FSDPManualRegistration, true, false, fsdp + " NCCL userbuffer registration"},
		{"delay_wgrad_compute", c.DelayWgradCompute, true, false, "delayed weight gradients for the expert-parallel all-to-all overlap (the reference requires overlap_moe_expert_parallel_comm; --pipeline-schedule zb-h1 or zb-h2 defers every weight gradient instead)"},
		{"megatron_fsdp_main_params_dtype", c.MegatronFSDPMainParamsDType != Float32, c.MegatronFSDPMainParamsDType, Float32, fsdp + " main parameters"},
		{"megatron_fsdp_main_grads_dtype", c.MegatronFSDPMainGradsDType != DTypeNone, c.MegatronFSDPMainGradsDType, "none", fsdp + " main gradients"},
		{"megatron_fsdp_grad_comm_dtype", c.MegatronFSDPGradCommDType != DTypeNone, c.MegatronFSDPGradCommDType, "none", fsdp + " gradient communication"},
		{"megatron_fsdp_use_decoupled_grad", c.MegatronFSDPUseDecoupledGrad, true, false, fsdp + " decoupled gradients"},
		{"megatron_fsdp_cuda_graph_mode", c.MegatronFSDPCUDAGraphMode, true, false, "CUDA graphs"},
		{"megatron_fsdp_enable_fine_grained_param_gather", c.MegatronFSDPEnableFineGrainedParamGather, true, false, fsdp + " fine-grained parameter gather"},
		{"megatron_fsdp_max_pool_double_buffer", c.MegatronFSDPMaxPoolDoubleBuffer, true, false, fsdp + " double buffers"},
	})
}
