package config

import (
	"fmt"
	"strings"
)

// Validate checks every rule of the reference's ModelParallelConfig (its
// __post_init__, docs/SEMANTICS.md § ModelParallelConfig checks) and the
// rules gotron checks up front that the reference enforces later
// (DECISIONS.md): the pipeline communication modes, the interleaved-schedule
// rules that need no microbatch count, the sizes, and the settings the CPU
// backend does not provide. It returns nil or a *ValidationError listing
// every violation.
//
// Validate does not modify c and does not need c to be finalized: unset
// optional settings are read through their defaults. Rules that need the
// world size are in ValidateWorld; rules that need the number of microbatches
// are in ValidateMicrobatches; rules that involve the DDP config are in
// ValidateTogether.
func (c ModelParallelConfig) Validate() error { return NewValidationError(c.Violations()) }

// Violations returns what Validate reports, as a slice (nil when c is valid).
// Use it to merge these violations with those of an enclosing config.
func (c ModelParallelConfig) Violations() []Violation { return c.violations(PlacementLoop) }

// violations is Violations for the model's chunks placed by pl
// (TransformerConfig.PipelinePlacement).
func (c ModelParallelConfig) violations(pl PipelinePlacement) []Violation {
	var vs violationList
	c.checkSizes(&vs)
	c.checkDTypes(&vs)
	c.checkReferenceRules(&vs)
	c.checkPipelineRules(&vs, pl)
	c.checkContextParallel(&vs)
	c.checkNotProvided(&vs)
	return vs
}

// Warnings returns the advice the reference gives as warnings rather than
// errors. At core_v0.15 and later that is one rule: expert parallelism with
// tensor parallelism should use sequence parallelism.
func (c ModelParallelConfig) Warnings() []string {
	var ws []string
	if c.ExpertModelParallelSize > 1 && c.TensorModelParallelSize > 1 && !c.SequenceParallel {
		ws = append(ws, fmt.Sprintf(
			"expert_model_parallel_size = %d with tensor_model_parallel_size = %d and sequence_parallel = false: "+
				"when using expert parallelism and tensor parallelism for training, sequence parallelism should be used (set sequence_parallel = true)",
			c.ExpertModelParallelSize, c.TensorModelParallelSize))
	}
	return ws
}

// checkSizes reports parallel sizes below 1 and optional counts below 0.
func (c ModelParallelConfig) checkSizes(vs *violationList) {
	for _, s := range []struct {
		name string
		v    int
	}{
		{"tensor_model_parallel_size", c.TensorModelParallelSize},
		{"pipeline_model_parallel_size", c.PipelineModelParallelSize},
		{"context_parallel_size", c.ContextParallelSize},
		{"expert_model_parallel_size", c.ExpertModelParallelSize},
	} {
		if s.v < 1 {
			vs.add(fieldList(s.name), "%s = %d: a parallel size must be ≥ 1; set it to 1 to turn this parallelism off", s.name, s.v)
		}
	}
	for _, s := range []struct {
		name, unset string
		v           int
	}{
		{"expert_tensor_parallel_size", "use tensor_model_parallel_size", c.ExpertTensorParallelSize},
		{"virtual_pipeline_model_parallel_size", "use the non-interleaved schedule", c.VirtualPipelineModelParallelSize},
		{"microbatch_group_size_per_vp_stage", "use pipeline_model_parallel_size", c.MicrobatchGroupSizePerVPStage},
		{"tensor_parallel_num_weight_shards", "use tensor_model_parallel_size", c.TensorParallelNumWeightShards},
		{"expert_tensor_parallel_num_weight_shards", "use expert_tensor_parallel_size", c.ExpertTensorParallelNumWeightShards},
	} {
		if s.v < 0 {
			vs.add(fieldList(s.name), "%s = %d: must be ≥ 1, or 0 (unset) to %s", s.name, s.v, s.unset)
		}
	}
	if p := c.NumMicrobatchesWithPartialActivationCheckpoints; p != nil && *p < 0 {
		vs.add(fieldList("num_microbatches_with_partial_activation_checkpoints"),
			"num_microbatches_with_partial_activation_checkpoints = %d: must be ≥ 0, or nil to leave recompute to the forward step", *p)
	}
}

// checkDTypes reports unset or out-of-range dtypes and fp16 with bf16.
func (c ModelParallelConfig) checkDTypes(vs *violationList) {
	if c.ParamsDType == DTypeNone {
		vs.add(fieldList("params_dtype"), "params_dtype is unset: set it to float32 (the default), bfloat16 or float16")
	}
	for _, d := range []struct {
		name string
		v    DType
	}{
		{"params_dtype", c.ParamsDType},
		{"autocast_dtype", c.AutocastDType},
		{"pipeline_dtype", c.PipelineDType},
	} {
		if !d.v.Valid() {
			vs.add(fieldList(d.name), "%s = %v is not a dtype: use float32, bfloat16 or float16", d.name, d.v)
		}
	}
	// Training layer (megatron/training/arguments.py): fp16 and bf16 exclude each other.
	if c.FP16 && c.BF16 {
		vs.add(fieldList("fp16", "bf16"), "fp16 and bf16 are both true: choose one mixed-precision type")
	}
}

// checkReferenceRules implements the rules of the reference's
// ModelParallelConfig.__post_init__ (docs/SEMANTICS.md § ModelParallelConfig
// checks, rules 1, 3, 4, 6, 7, 8, 9 and 12; rule 10 is a warning, rules 2, 5
// and 11 are defaults).
func (c ModelParallelConfig) checkReferenceRules(vs *violationList) {
	tp := c.TensorModelParallelSize
	pp := c.PipelineModelParallelSize

	// Rule 1.
	if c.SequenceParallel && tp <= 1 {
		vs.add(fieldList("sequence_parallel", "tensor_model_parallel_size"),
			"sequence_parallel is true and tensor_model_parallel_size is %d: sequence parallelism splits the "+
				"sequence over the tensor-parallel ranks; set --tensor-model-parallel-size above 1, or drop --sequence-parallel", tp)
	}

	// Rule 3, dense then expert.
	checkWeightShards(vs, "tensor_parallel_num_weight_shards", "tensor_model_parallel_size",
		"gtp_weight_remat_size", c.TensorParallelNumWeightShards, tp, c.GTPWeightRematSize)
	checkWeightShards(vs, "expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size",
		"expert_gtp_weight_remat_size", c.ExpertTensorParallelNumWeightShards,
		c.EffectiveExpertTensorParallelSize(), c.ExpertGTPWeightRematSize)

	// Rule 4.
	if pp > 1 && c.PipelineDType == DTypeNone {
		vs.add(fieldList("pipeline_dtype", "pipeline_model_parallel_size"),
			"pipeline_model_parallel_size = %d needs pipeline_dtype, the element type of pipeline messages: "+
				"set pipeline_dtype (usually to params_dtype, here %v)", pp, c.ParamsDType)
	}

	// Rule 6 (a warning in the reference, an error in its training layer;
	// here the TE implementation is simply not provided).
	switch c.CrossEntropyFusionImpl {
	case "native":
	case "te":
		vs.add(fieldList("cross_entropy_fusion_impl"),
			"cross_entropy_fusion_impl = \"te\" selects Transformer Engine's cross entropy, which the CPU backend does not provide: use \"native\"")
	default:
		vs.add(fieldList("cross_entropy_fusion_impl"),
			"cross_entropy_fusion_impl = %q: must be \"native\" (or \"te\", which the CPU backend does not provide)", c.CrossEntropyFusionImpl)
	}

	// Rules 7, 8, 9.
	if c.DeferEmbeddingWgradCompute {
		if pp == 1 {
			vs.add(fieldList("defer_embedding_wgrad_compute", "pipeline_model_parallel_size"),
				"defer_embedding_wgrad_compute = true defers work to the pipeline flush, but pipeline_model_parallel_size = 1: "+
					"turn defer_embedding_wgrad_compute off or set pipeline_model_parallel_size > 1")
		}
		if !c.GradientAccumulationFusion {
			vs.add(fieldList("defer_embedding_wgrad_compute", "gradient_accumulation_fusion"),
				"defer_embedding_wgrad_compute = true needs gradient_accumulation_fusion = true: turn defer_embedding_wgrad_compute off")
		}
		if c.WgradDeferralLimit < 0 {
			vs.add(fieldList("wgrad_deferral_limit", "defer_embedding_wgrad_compute"),
				"wgrad_deferral_limit = %d: must be ≥ 0 when defer_embedding_wgrad_compute is on (0 defers all microbatches)", c.WgradDeferralLimit)
		}
	}

	// Rule 12.
	if c.OverlapP2PCommWarmupFlush && (!c.OverlapP2PComm || c.BatchP2PComm) {
		vs.add(fieldList("overlap_p2p_comm_warmup_flush", "overlap_p2p_comm", "batch_p2p_comm"),
			"overlap_p2p_comm_warmup_flush = true works only with overlap_p2p_comm = true and batch_p2p_comm = false "+
				"(here overlap_p2p_comm = %v, batch_p2p_comm = %v): set those two, or turn overlap_p2p_comm_warmup_flush off",
			c.OverlapP2PComm, c.BatchP2PComm)
	}
}

// checkWeightShards implements the GTP reconciliation of rule 3 for one
// (shards, tp) pair and reports a derived GTP degree other than 1, which is
// not provided.
func checkWeightShards(vs *violationList, shardsField, tpField, gtpField string, shards, tp, gtp int) {
	if tp < 1 || shards < 0 {
		return // reported by checkSizes
	}
	if shards > 0 {
		switch {
		case shards < tp:
			vs.add(fieldList(shardsField, tpField),
				"%s (%d) must be ≥ %s (%d): leave %s unset (0) or set it to a multiple of %d",
				shardsField, shards, tpField, tp, shardsField, tp)
			return
		case shards%tp != 0:
			vs.add(fieldList(shardsField, tpField),
				"%s (%d) must be divisible by %s (%d), but %d mod %d = %d: leave %s unset (0) or set it to a multiple of %d",
				shardsField, shards, tpField, tp, shards, tp, shards%tp, shardsField, tp)
			return
		}
		if g := shards / tp; g != 1 {
			vs.add(fieldList(shardsField, tpField),
				"%s = %d with %s = %d gives a GTP degree of %d/%d = %d, but generalized tensor parallelism is not provided by the CPU backend: "+
					"leave %s unset (0) or equal to %s",
				shardsField, shards, tpField, tp, shards, tp, g, shardsField, tpField)
		}
		return
	}
	if gtp != 1 {
		vs.add(fieldList(gtpField),
			"%s = %d: generalized tensor parallelism is not provided by the CPU backend, and this value is derived, not set: set it to 1",
			gtpField, gtp)
	}
}

// checkPipelineRules implements the pipeline rules the reference enforces in
// its schedules, initialize_model_parallel and training layer, which gotron
// checks up front (DECISIONS.md).
func (c ModelParallelConfig) checkPipelineRules(vs *violationList, pl PipelinePlacement) {
	pp := c.PipelineModelParallelSize
	vpp := c.VirtualPipelineModelParallelSize

	// Interleaved schedule: "Can not use both overlap_p2p_comm and batch_p2p_comm".
	if c.OverlapP2PComm && c.BatchP2PComm {
		vs.add(fieldList("overlap_p2p_comm", "batch_p2p_comm"),
			"overlap_p2p_comm and batch_p2p_comm are both true, but overlapped pipeline communication cannot be batched: "+
				"set batch_p2p_comm = false (Megatron-LM's training layer sets batch_p2p_comm = !overlap_p2p_comm)")
	}

	// Non-interleaved schedule: overlap is not supported (the training layer
	// silently turns it off; gotron refuses instead).
	if c.OverlapP2PComm && vpp == 0 {
		vs.add(fieldList("overlap_p2p_comm", "virtual_pipeline_model_parallel_size"),
			"overlap_p2p_comm = true needs the interleaved schedule, but virtual_pipeline_model_parallel_size is unset (0): "+
				"set virtual_pipeline_model_parallel_size ≥ 1 with pipeline_model_parallel_size > 1, or turn overlap_p2p_comm off")
	}

	if vpp > 0 {
		// initialize_model_parallel: the interleaved schedule needs pp > 1.
		if pp == 1 {
			vs.add(fieldList("virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size"),
				"virtual_pipeline_model_parallel_size = %d selects the interleaved schedule, which needs pipeline_model_parallel_size > 1 (here 1): "+
					"raise pipeline_model_parallel_size or unset virtual_pipeline_model_parallel_size (0)", vpp)
		}
		// Training layer: without overlap, pp = 2 would put the sends to the
		// next and to the previous stage, the same peer, in one batch (#750).
		if pp == 2 && !c.OverlapP2PComm && pl == PlacementLoop {
			vs.add(fieldList("virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size", "overlap_p2p_comm"),
				"the interleaved schedule (virtual_pipeline_model_parallel_size = %d) with overlap_p2p_comm = false needs pipeline_model_parallel_size > 2 (here 2): "+
					"with two stages the next and the previous stage are the same peer within one batch; "+
					"use pipeline_model_parallel_size ≥ 3, or overlap_p2p_comm = true with batch_p2p_comm = false, or unset virtual_pipeline_model_parallel_size",
				vpp)
		}
		// Schedule: G must be ≥ pp (the upper bound needs num_microbatches).
		if g := c.MicrobatchGroupSizePerVPStage; g > 0 && pp > 1 && g < pp {
			vs.add(fieldList("microbatch_group_size_per_vp_stage", "pipeline_model_parallel_size"),
				"microbatch_group_size_per_vp_stage = %d is smaller than pipeline_model_parallel_size = %d, but the interleaved schedule needs "+
					"pipeline_model_parallel_size ≤ microbatch_group_size_per_vp_stage ≤ num_microbatches: set it to at least %d or leave it unset (0)",
				g, pp, pp)
		}
	}
}

// checkContextParallel checks hierarchical_context_parallel_sizes against
// context_parallel_size (initialize_model_parallel asserts the product).
func (c ModelParallelConfig) checkContextParallel(vs *violationList) {
	h := c.HierarchicalContextParallelSizes
	if len(h) == 0 {
		return
	}
	prod := 1
	terms := make([]string, len(h))
	for i, s := range h {
		if s < 1 {
			vs.add(fieldList("hierarchical_context_parallel_sizes"),
				"hierarchical_context_parallel_sizes[%d] = %d: every level must be ≥ 1", i, s)
			return
		}
		prod *= s
		terms[i] = fmt.Sprint(s)
	}
	if c.ContextParallelSize >= 1 && prod != c.ContextParallelSize {
		vs.add(fieldList("hierarchical_context_parallel_sizes", "context_parallel_size"),
			"hierarchical_context_parallel_sizes %v multiply to %s = %d, but context_parallel_size = %d: "+
				"the product of the levels must equal context_parallel_size",
			h, strings.Join(terms, "·"), prod, c.ContextParallelSize)
	}
}

// notProvided is a setting whose non-default value asks for machinery the CPU
// backend does not have.
type notProvided struct {
	name     string
	changed  bool
	value    any
	fallback any // the value to set instead
	what     string
}

// reportNotProvided adds one violation per changed setting.
func reportNotProvided(vs *violationList, settings []notProvided) {
	for _, s := range settings {
		if s.changed {
			vs.add(fieldList(s.name), "%s = %v asks for %s, which the CPU backend does not provide: set it to %v",
				s.name, s.value, s.what, s.fallback)
		}
	}
}

// checkNotProvided reports GPU-only and otherwise unprovided settings with
// non-default values, and checks the values of the accepted no-op settings.
func (c ModelParallelConfig) checkNotProvided(vs *violationList) {
	const ub = "Transformer Engine userbuffer GEMM/communication overlap"
	const off = "CPU offloading of activations or weights"
	reportNotProvided(vs, []notProvided{
		{"max_seqlen_per_dp_cp_rank", c.MaxSeqlenPerDPCPRank != 0, c.MaxSeqlenPerDPCPRank, "0 (unset)", "hybrid context parallelism"},
		{"hybrid_context_parallel", c.HybridContextParallel, true, false, "hybrid context parallelism"},
		{"enable_autocast", c.EnableAutocast, true, false, "autocast, float32 parameters with lower-precision GEMMs (gotron's bfloat16 and float16 are parameter types: params_dtype, --bf16, --fp16)"},
		{"use_te_rng_tracker", c.UseTERNGTracker, true, false, "Transformer Engine's RNG tracker"},
		{"tp_comm_overlap", c.TPCommOverlap, true, false, ub},
		{"tp_comm_bulk_wgrad", !c.TPCommBulkWgrad, false, true, ub},
		{"tp_comm_bulk_dgrad", !c.TPCommBulkDgrad, false, true, ub},
		{"tp_comm_overlap_ag", !c.TPCommOverlapAG, false, true, ub},
		{"tp_comm_overlap_rs", !c.TPCommOverlapRS, false, true, ub},
		{"tp_comm_overlap_rs_dgrad", c.TPCommOverlapRSDgrad, true, false, ub},
		{"tp_comm_split_ag", !c.TPCommSplitAG, false, true, ub},
		{"tp_comm_atomic_ag", c.TPCommAtomicAG, true, false, ub},
		{"tp_comm_split_rs", !c.TPCommSplitRS, false, true, ub},
		{"tp_comm_atomic_rs", c.TPCommAtomicRS, true, false, ub},
		{"tp_comm_overlap_disable_qkv", c.TPCommOverlapDisableQKV, true, false, ub},
		{"tp_comm_overlap_disable_fc1", c.TPCommOverlapDisableFC1, true, false, ub},
		{"overlap_moe_expert_parallel_comm", c.OverlapMoEExpertParallelComm, true, false, "expert-parallel all-to-all overlap on CUDA streams"},
		{"delay_wgrad_compute", c.DelayWgradCompute, true, false, "delayed weight gradients for the expert-parallel all-to-all overlap (the reference requires overlap_moe_expert_parallel_comm; --pipeline-schedule zb-h1 or zb-h2 defers every weight gradient instead)"},
		{"overlap_dispatch_backward_with_experts_wgrad", c.OverlapDispatchBackwardWithExpertsWgrad, true, false, "Transformer Engine grouped-GEMM delayed expert weight gradients"},
		{"ep_overlap_early_attn_memory_release", c.EPOverlapEarlyAttnMemoryRelease, true, false, "expert-parallel overlap memory reordering"},
		{"use_ring_exchange_p2p", c.UseRingExchangeP2P, true, false, "the custom torch.distributed.ring_exchange kernel"},
		{"cpu_offloading", c.CPUOffloading, true, false, off},
		{"cpu_offloading_num_layers", c.CPUOffloadingNumLayers != 0, c.CPUOffloadingNumLayers, 0, off},
		{"cpu_offloading_context", c.CPUOffloadingContext != nil, "non-nil", "nil", off},
		{"cpu_offloading_activations", !c.CPUOffloadingActivations, false, true, off},
		{"cpu_offloading_weights", c.CPUOffloadingWeights, true, false, off},
		{"cpu_offloading_double_buffering", c.CPUOffloadingDoubleBuffering, true, false, off},
		{"cpu_offloading_retain_pinned_cpu_buffers", c.CPUOffloadingRetainPinnedCPUBuffers, true, false, off},
	})

	switch c.TPCommBootstrapBackend {
	case "nccl":
	case "mpi", "gloo":
		vs.add(fieldList("tp_comm_bootstrap_backend"),
			"tp_comm_bootstrap_backend = %q asks for %s, which the CPU backend does not provide: set it to \"nccl\" (the default)",
			c.TPCommBootstrapBackend, ub)
	default:
		vs.add(fieldList("tp_comm_bootstrap_backend"),
			"tp_comm_bootstrap_backend = %q: must be \"nccl\" (the default; \"mpi\" and \"gloo\" are not provided)", c.TPCommBootstrapBackend)
	}

	switch c.PipelineModelParallelCommBackend {
	case "", "nccl", "ucc":
	default:
		vs.add(fieldList("pipeline_model_parallel_comm_backend"),
			"pipeline_model_parallel_comm_backend = %q: must be \"\", \"nccl\" or \"ucc\" (all are no-ops in gotron)",
			c.PipelineModelParallelCommBackend)
	}
}
