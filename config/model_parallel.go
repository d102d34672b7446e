package config

// ModelParallelConfig holds the parallelism, precision and pipeline-schedule
// settings shared by every gotron layer: Megatron-Core's ModelParallelConfig
// (megatron/core/model_parallel_config.py, core_v0.19), every field, in the
// same order, with Go names. JSON keys are the reference's names.
//
// Build one with DefaultModelParallelConfig (the zero value is not the
// reference's default: several defaults are true or 1), change what you need,
// then call Validate. Finalize fills in the derived defaults; the rest of
// gotron trusts a config that has been finalized and validated.
//
// Optional integer settings whose reference default is None use 0 for "not
// set": VirtualPipelineModelParallelSize, ExpertTensorParallelSize,
// TensorParallelNumWeightShards, ExpertTensorParallelNumWeightShards,
// MaxSeqlenPerDPCPRank and MicrobatchGroupSizePerVPStage, for none of which 0
// is a meaningful value. NumMicrobatchesWithPartialActivationCheckpoints,
// where 0 does mean something, is a *int. Negative values are violations.
//
// Settings that drive GPU machinery gotron's CPU backend does not have
// (Transformer Engine, userbuffers, CUDA streams, APEX kernels, offloading)
// are present so that configurations carry over; a non-default value is a
// validation error, never silently ignored (DECISIONS.md). Their doc comments
// say "Not provided".
type ModelParallelConfig struct {
	// ---- Model parallelism ----

	// TensorModelParallelSize is the tensor-parallel degree tp: the weights of
	// ColumnParallelLinear, RowParallelLinear and VocabParallelEmbedding are
	// split tp ways. Must be ≥ 1. Default 1.
	TensorModelParallelSize int `json:"tensor_model_parallel_size"`

	// TensorParallelNumWeightShards is the total number of shards of a weight
	// over the tensor-parallel and GTP axes (tp·gtp). 0 (unset) means tp.
	// When set it must be ≥ tp and divisible by tp, and it determines
	// GTPWeightRematSize = shards/tp. GTP (generalized tensor parallelism) is
	// not provided, so the only accepted values are 0 and tp.
	TensorParallelNumWeightShards int `json:"tensor_parallel_num_weight_shards,omitempty"`

	// GTPWeightRematSize is the GTP weight-rematerialisation degree, derived
	// from TensorParallelNumWeightShards by Finalize. Not provided: must stay 1.
	GTPWeightRematSize int `json:"gtp_weight_remat_size"`

	// PipelineModelParallelCommBackend names the backend of the pipeline
	// groups ("nccl" or "ucc"; "" for the default). Accepted and a no-op:
	// gotron's pipeline messages travel over the same comm backend as every
	// other collective. Other values are rejected as typos.
	PipelineModelParallelCommBackend string `json:"pipeline_model_parallel_comm_backend,omitempty"`

	// PipelineModelParallelSize is the pipeline-parallel degree pp: the
	// transformer layers are split over pp stages. Must be ≥ 1. Default 1.
	PipelineModelParallelSize int `json:"pipeline_model_parallel_size"`

	// VirtualPipelineModelParallelSize is the number of model chunks per
	// pipeline rank for the interleaved 1F1B schedule (arXiv 2104.04473 §2.2,
	// bubble (p−1)/(v·m)). 0 means unset: the non-interleaved schedule (the
	// reference's None). Any value ≥ 1 selects the interleaved schedule, as in
	// the reference, where 1 is an interleaved schedule with one chunk.
	// Requires pp > 1, and pp > 2 unless OverlapP2PComm is set.
	VirtualPipelineModelParallelSize int `json:"virtual_pipeline_model_parallel_size,omitempty"`

	// SequenceParallel splits the layernorm and dropout regions along the
	// sequence dimension over the tensor-parallel group (arXiv 2205.05198):
	// an all-gather before column-parallel GEMMs, a reduce-scatter after
	// row-parallel ones, and a TP all-reduce of the gradients of
	// sequence-parallel parameters in finalize. Requires tp > 1.
	SequenceParallel bool `json:"sequence_parallel"`

	// ContextParallelSize is the context-parallel degree cp: each sequence is
	// split over cp ranks (zigzag, 2·cp chunks), and gradients are reduced over
	// the dp×cp group. Must be ≥ 1. Default 1.
	ContextParallelSize int `json:"context_parallel_size"`

	// HierarchicalContextParallelSizes gives the group sizes of the levels of
	// hierarchical context parallelism, for the "a2a+p2p" attention: the first
	// entry is the all-to-all group size, the second the ring (p2p) group size.
	// nil means unset. When set, every entry is ≥ 1 and their product equals
	// ContextParallelSize.
	HierarchicalContextParallelSizes []int `json:"hierarchical_context_parallel_sizes,omitempty"`

	// MaxSeqlenPerDPCPRank is the longest sequence one dp×cp rank can hold,
	// used only by hybrid context parallelism. 0 means unset. Not provided:
	// must stay 0.
	MaxSeqlenPerDPCPRank int `json:"max_seqlen_per_dp_cp_rank,omitempty"`

	// HybridContextParallel balances variable-length packed samples over CP
	// ranks. Not provided: must stay false.
	HybridContextParallel bool `json:"hybrid_context_parallel"`

	// ExpertModelParallelSize is the expert-parallel degree ep: MoE experts are
	// distributed over ep ranks of the expert grid (etp, ep, edp, pp). Must be
	// ≥ 1. Default 1.
	ExpertModelParallelSize int `json:"expert_model_parallel_size"`

	// ExpertTensorParallelSize is the tensor-parallel degree etp inside expert
	// layers. 0 means unset; Finalize sets it to TensorModelParallelSize.
	ExpertTensorParallelSize int `json:"expert_tensor_parallel_size,omitempty"`

	// ExpertTensorParallelNumWeightShards is TensorParallelNumWeightShards for
	// expert layers, relative to etp. 0 means etp. Not provided beyond 0 and
	// etp.
	ExpertTensorParallelNumWeightShards int `json:"expert_tensor_parallel_num_weight_shards,omitempty"`

	// ExpertGTPWeightRematSize is GTPWeightRematSize for expert layers,
	// derived by Finalize. Not provided: must stay 1.
	ExpertGTPWeightRematSize int `json:"expert_gtp_weight_remat_size"`

	// ---- Initialization ----

	// PerformInitialization draws the initial weights. Turn it off
	// (Megatron's --no-initialization) when the weights will be loaded from
	// a checkpoint anyway: gpt.NewChunk then draws nothing and leaves them
	// zero (the constant ones, the norms' γ, are set as usual); gotron's
	// trainer refuses it without a checkpoint to load. Default true.
	PerformInitialization bool `json:"perform_initialization"`

	// UseCPUInitialization asks for the reference's CPU initialisation: the
	// master weight is drawn whole from the seeded generator and each rank
	// keeps its slice, so every parallel layout starts from the same weights.
	// gotron always initialises this way (DECISIONS.md, "Initialisation"), so
	// false is accepted and behaves the same.
	UseCPUInitialization bool `json:"use_cpu_initialization"`

	// ---- Training ----

	// FP16 trains with float16 parameters, float32 main parameters and loss
	// scaling. Exclusive with BF16.
	FP16 bool `json:"fp16"`

	// BF16 trains with bfloat16 parameters and float32 main parameters.
	// Exclusive with FP16.
	BF16 bool `json:"bf16"`

	// ParamsDType is the storage type of the model parameters when they are
	// created. Must be set. Default Float32.
	ParamsDType DType `json:"params_dtype"`

	// Timers returns named timers for the schedules, which time the whole
	// pass ("forward-backward", level 1, started with BarrierWithL1Time)
	// and each step's computation ("forward-compute", "backward-compute",
	// level 2), and for the P2P communicator's calls. nil: no timing.
	Timers TimersFunc `json:"-"`

	// FinalizeModelGradsFunc is called by the schedules once per iteration,
	// after the last backward step, to finish the gradients (data-parallel
	// reduction, sequence-parallel and embedding all-reduces, per-token
	// scaling). nil: the schedules leave the gradients as they are.
	FinalizeModelGradsFunc FinalizeModelGradsFunc `json:"-"`

	// GradScaleFunc returns the loss scale the schedules multiply the loss by
	// before backward. nil: scale 1.
	GradScaleFunc LossScaleFunc `json:"-"`

	// MoEGradScaleFunc returns the scale of the MoE auxiliary losses. nil:
	// GradScaleFunc's scale.
	MoEGradScaleFunc LossScaleFunc `json:"-"`

	// MTPGradScaleFunc returns the scale of the multi-token-prediction losses.
	// nil: GradScaleFunc's scale.
	MTPGradScaleFunc LossScaleFunc `json:"-"`

	// NoSyncFunc suspends asynchronous data-parallel gradient reduction for
	// all microbatches but the last. nil: nothing to suspend (the DDP wrapper
	// installs its own).
	NoSyncFunc NoSyncFunc `json:"-"`

	// GradSyncFunc launches the gradient reduction of one model chunk as soon
	// as its last backward is done (used by the interleaved schedule). nil:
	// the reduction is launched by the DDP hooks or in finalize.
	GradSyncFunc ChunkSyncFunc `json:"-"`

	// ParamSyncFunc launches the parameter all-gather of one model chunk ahead
	// of its first forward (distributed optimizer with overlap_param_gather
	// and align_param_gather). nil: no schedule-driven all-gather.
	ParamSyncFunc ChunkSyncFunc `json:"-"`

	// DeterministicMode asks the reference for deterministic kernels where
	// it has a choice (VocabParallelEmbedding looks its rows up by index).
	// Every gotron kernel and collective is deterministic already (sums in
	// a fixed order, the same bits run to run), so the setting changes
	// nothing; it is accepted so that configs carry over.
	DeterministicMode bool `json:"deterministic_mode"`

	// EnableAutocast asks the schedules to run the forward step under
	// AutocastDType, as the reference runs it under torch.autocast. gotron
	// has no autocast (its 16-bit types are parameter types: ParamsDType,
	// with float32 main parameters): Validate refuses true.
	EnableAutocast bool `json:"enable_autocast"`

	// AutocastDType is the autocast type. DTypeNone (unset) means
	// ParamsDType; Finalize fills it in.
	AutocastDType DType `json:"autocast_dtype,omitempty"`

	// NumMicrobatchesWithPartialActivationCheckpoints, when non-nil and equal
	// to N, makes the schedules pass the forward step a third argument
	// checkpoint_activations_microbatch = (k mod (warmup+1)) ≥ N for
	// microbatch k: the first N microbatches of each window of outstanding
	// backwards recompute only part of their layers. nil leaves recompute to
	// the forward step. Must be ≥ 0 when set.
	NumMicrobatchesWithPartialActivationCheckpoints *int `json:"num_microbatches_with_partial_activation_checkpoints,omitempty"`

	// ---- Optimizations ----

	// GradientAccumulationFusion has every linear layer's weight-gradient
	// GEMM accumulate straight into the main gradient (APEX's
	// fused_weight_gradient_mlp_cuda in the reference; gotron's GEMM with
	// beta 1). False, the reference's default here (its training
	// arguments default to true, as gotron train does), computes the
	// product apart, rounds it to the parameters' type when they are
	// 16-bit, and adds it to the main gradient (nn.AccumulateWeightGrad).
	GradientAccumulationFusion bool `json:"gradient_accumulation_fusion"`

	// UseTERNGTracker uses Transformer Engine's RNG tracker. Not provided:
	// must stay false. gotron's own tracker has the reference's named states.
	UseTERNGTracker bool `json:"use_te_rng_tracker"`

	// TPCommOverlap overlaps tensor-parallel collectives with GEMMs through
	// Transformer Engine userbuffers. Not provided: must stay false.
	TPCommOverlap bool `json:"tp_comm_overlap"`

	// TPCommBulkWgrad is a TE userbuffer overlap option (all-gather with the
	// activation-gradient GEMM). Not provided: must stay true (the default).
	TPCommBulkWgrad bool `json:"tp_comm_bulk_wgrad"`

	// TPCommBulkDgrad is a TE userbuffer overlap option (reduce-scatter with
	// the weight-gradient GEMM). Not provided: must stay true (the default).
	TPCommBulkDgrad bool `json:"tp_comm_bulk_dgrad"`

	// TPCommOverlapAG is a TE userbuffer overlap option (pipelined GEMM and
	// all-gather). Not provided: must stay true (the default).
	TPCommOverlapAG bool `json:"tp_comm_overlap_ag"`

	// TPCommOverlapRS is a TE userbuffer overlap option (pipelined GEMM and
	// reduce-scatter). Not provided: must stay true (the default).
	TPCommOverlapRS bool `json:"tp_comm_overlap_rs"`

	// TPCommOverlapRSDgrad is a TE userbuffer overlap option (reduce-scatter
	// with the data-gradient GEMM). Not provided: must stay false.
	TPCommOverlapRSDgrad bool `json:"tp_comm_overlap_rs_dgrad"`

	// TPCommSplitAG is a deprecated TE userbuffer option. Not provided: must
	// stay true (the default).
	TPCommSplitAG bool `json:"tp_comm_split_ag"`

	// TPCommAtomicAG is a deprecated TE userbuffer option. Not provided: must
	// stay false.
	TPCommAtomicAG bool `json:"tp_comm_atomic_ag"`

	// TPCommSplitRS is a deprecated TE userbuffer option. Not provided: must
	// stay true (the default).
	TPCommSplitRS bool `json:"tp_comm_split_rs"`

	// TPCommAtomicRS is a deprecated TE userbuffer option. Not provided: must
	// stay false.
	TPCommAtomicRS bool `json:"tp_comm_atomic_rs"`

	// CrossEntropyLossFusion asks for the fused cross-entropy. gotron's
	// vocab-parallel cross entropy is a single fused pass either way, with
	// the same numbers, so the flag is accepted and a no-op.
	CrossEntropyLossFusion bool `json:"cross_entropy_loss_fusion"`

	// CrossEntropyFusionImpl is "native" (the Megatron-Core kernel, gotron's)
	// or "te" (Transformer Engine's, not provided). Default "native".
	CrossEntropyFusionImpl string `json:"cross_entropy_fusion_impl"`

	// TPCommOverlapDisableQKV disables the TE userbuffer overlap for the QKV
	// projection. Not provided: must stay false.
	TPCommOverlapDisableQKV bool `json:"tp_comm_overlap_disable_qkv"`

	// TPCommOverlapDisableFC1 disables the TE userbuffer overlap for FC1.
	// Not provided: must stay false.
	TPCommOverlapDisableFC1 bool `json:"tp_comm_overlap_disable_fc1"`

	// TPCommBootstrapBackend is the bootstrap backend of TE userbuffers
	// ("nccl", "mpi" or "gloo"). Not provided: must stay "nccl" (the default).
	TPCommBootstrapBackend string `json:"tp_comm_bootstrap_backend"`

	// OverlapMoEExpertParallelComm overlaps the EP all-to-all with the
	// computation of another microbatch (combined 1F1B on CUDA streams). Not
	// provided: must stay false.
	OverlapMoEExpertParallelComm bool `json:"overlap_moe_expert_parallel_comm"`

	// DelayWgradCompute delays each layer's weight-gradient GEMMs behind
	// the expert-parallel all-to-all of another microbatch; the reference
	// requires OverlapMoEExpertParallelComm for it. Not provided (neither
	// is that overlap): must stay false; the zero-bubble schedules
	// (--pipeline-schedule zb-h1, zb-h2) defer every weight gradient.
	DelayWgradCompute bool `json:"delay_wgrad_compute"`

	// OverlapDispatchBackwardWithExpertsWgrad delays TE grouped-GEMM expert
	// weight gradients onto a side stream. Not provided: must stay false.
	OverlapDispatchBackwardWithExpertsWgrad bool `json:"overlap_dispatch_backward_with_experts_wgrad"`

	// EPOverlapEarlyAttnMemoryRelease reorders attention backward under EP
	// overlap. Not provided: must stay false.
	EPOverlapEarlyAttnMemoryRelease bool `json:"ep_overlap_early_attn_memory_release"`

	// ---- Pipeline parallel ----

	// PipelineDType is the element type of pipeline messages (activations and
	// their gradients between stages), usually ParamsDType. Required when
	// pp > 1; DTypeNone (unset) is allowed only when pp = 1.
	PipelineDType DType `json:"pipeline_dtype,omitempty"`

	// VariableSeqLengths exchanges the tensor shape (three int64s) before
	// every pipeline message, for microbatches of varying sequence length.
	VariableSeqLengths bool `json:"variable_seq_lengths"`

	// OverlapP2PComm overlaps pipeline sends and receives with computation in
	// the interleaved schedule. Requires the interleaved schedule
	// (VirtualPipelineModelParallelSize set) and BatchP2PComm off.
	OverlapP2PComm bool `json:"overlap_p2p_comm"`

	// BatchP2PComm issues the sends and receives of a schedule step as one
	// batch (the reference's batch_isend_irecv) rather than one by one in
	// even/odd order. Must be false when OverlapP2PComm is set. Default true.
	BatchP2PComm bool `json:"batch_p2p_comm"`

	// BatchP2PSync synchronises the device after a batched exchange, a
	// workaround for old PyTorch. Accepted and a no-op (DECISIONS.md:
	// perf-only knobs without a CPU meaning). Default true.
	BatchP2PSync bool `json:"batch_p2p_sync"`

	// UseRingExchangeP2P uses the custom torch.distributed.ring_exchange
	// kernel. Not provided: must stay false.
	UseRingExchangeP2P bool `json:"use_ring_exchange_p2p"`

	// DeallocatePipelineOutputs releases a stage's output buffer once it has
	// been sent; backward then runs from the saved graph node with the
	// received gradient. No effect without pipeline parallelism. Default
	// false (the training layer turns it on).
	DeallocatePipelineOutputs bool `json:"deallocate_pipeline_outputs"`

	// DeferEmbeddingWgradCompute defers the last stage's output-layer
	// weight-gradient GEMMs to the pipeline flush, where the last stage
	// waits for the earlier stages' last backwards (pp.DeferEmbeddingWgrad).
	// It requires GradientAccumulationFusion and pp > 1, and is refused
	// with a zero-bubble schedule, which defers every weight gradient.
	DeferEmbeddingWgradCompute bool `json:"defer_embedding_wgrad_compute"`

	// WgradDeferralLimit is how many microbatches DeferEmbeddingWgradCompute
	// defers (0: all): gotron defers the last ones, where the reference
	// defers the first, so that the gradient still sums its microbatches
	// in order. Only read with DeferEmbeddingWgradCompute, which requires
	// it to be ≥ 0.
	WgradDeferralLimit int `json:"wgrad_deferral_limit"`

	// OverlapP2PCommWarmupFlush also overlaps pipeline communication in the
	// warmup and flush phases. Requires OverlapP2PComm and not BatchP2PComm.
	OverlapP2PCommWarmupFlush bool `json:"overlap_p2p_comm_warmup_flush"`

	// MicrobatchGroupSizePerVPStage is G, the number of consecutive
	// microbatches a rank runs through one model chunk before moving to the
	// next (interleaved schedule, docs/SEMANTICS.md § Interleaved schedule
	// table). 0 means unset; Finalize sets it to PipelineModelParallelSize (a
	// depth-first schedule). With the interleaved schedule G must lie in
	// [pp, num_microbatches].
	MicrobatchGroupSizePerVPStage int `json:"microbatch_group_size_per_vp_stage,omitempty"`

	// MTPStandalone is set from the pipeline layout when the multi-token
	// prediction block sits on its own virtual stage; in the reference it
	// forces the shape exchange in pipeline messages (p2p.Config has it).
	// gotron's trainer derives those shapes from the layout instead and
	// exchanges none (TransformerConfig.MTPStandalone says where).
	MTPStandalone bool `json:"mtp_standalone"`

	// ---- CPU offloading ----

	// CPUOffloading offloads activations from the GPU to host memory. Not
	// provided (there is no device memory to offload from): must stay false.
	CPUOffloading bool `json:"cpu_offloading"`

	// CPUOffloadingNumLayers is the number of layers to offload. Not
	// provided: must stay 0.
	CPUOffloadingNumLayers int `json:"cpu_offloading_num_layers"`

	// CPUOffloadingContext is the offloading machinery's internal scope. Not
	// provided: must stay nil.
	CPUOffloadingContext ScopeFunc `json:"-"`

	// CPUOffloadingActivations offloads activations. Not provided: must stay
	// true (the default).
	CPUOffloadingActivations bool `json:"cpu_offloading_activations"`

	// CPUOffloadingWeights offloads weights. Not provided: must stay false.
	CPUOffloadingWeights bool `json:"cpu_offloading_weights"`

	// CPUOffloadingDoubleBuffering double-buffers reloads. Not provided: must
	// stay false.
	CPUOffloadingDoubleBuffering bool `json:"cpu_offloading_double_buffering"`

	// CPUOffloadingRetainPinnedCPUBuffers keeps pinned host buffers. Not
	// provided: must stay false.
	CPUOffloadingRetainPinnedCPUBuffers bool `json:"cpu_offloading_retain_pinned_cpu_buffers"`

	// ---- Timing ----

	// BarrierWithL1Time asks level-1 timers to wait on a world barrier before
	// starting. Accepted and a no-op (DECISIONS.md: perf-only knobs without a
	// CPU meaning). Default true.
	BarrierWithL1Time bool `json:"barrier_with_L1_time"`
}

// DefaultModelParallelConfig returns Megatron-Core's defaults: all parallel
// sizes 1, float32 parameters, batch_p2p_comm, batch_p2p_sync,
// perform_initialization and barrier_with_L1_time true, the TE userbuffer
// defaults, and every optional setting unset.
func DefaultModelParallelConfig() ModelParallelConfig {
	return ModelParallelConfig{
		TensorModelParallelSize:   1,
		GTPWeightRematSize:        1,
		PipelineModelParallelSize: 1,
		ContextParallelSize:       1,
		ExpertModelParallelSize:   1,
		ExpertGTPWeightRematSize:  1,
		PerformInitialization:     true,
		ParamsDType:               Float32,
		TPCommBulkWgrad:           true,
		TPCommBulkDgrad:           true,
		TPCommOverlapAG:           true,
		TPCommOverlapRS:           true,
		TPCommSplitAG:             true,
		TPCommSplitRS:             true,
		CrossEntropyFusionImpl:    "native",
		TPCommBootstrapBackend:    "nccl",
		BatchP2PComm:              true,
		BatchP2PSync:              true,
		CPUOffloadingActivations:  true,
		BarrierWithL1Time:         true,
	}
}

// Interleaved reports whether the interleaved pipeline schedule is selected
// (VirtualPipelineModelParallelSize set).
func (c ModelParallelConfig) Interleaved() bool { return c.VirtualPipelineModelParallelSize > 0 }

// NumModelChunks returns the number of model chunks per pipeline rank:
// VirtualPipelineModelParallelSize when set, else 1.
func (c ModelParallelConfig) NumModelChunks() int {
	if c.VirtualPipelineModelParallelSize > 0 {
		return c.VirtualPipelineModelParallelSize
	}
	return 1
}

// EffectiveExpertTensorParallelSize returns ExpertTensorParallelSize, or
// TensorModelParallelSize when it is unset (the reference's default).
func (c ModelParallelConfig) EffectiveExpertTensorParallelSize() int {
	if c.ExpertTensorParallelSize == 0 {
		return c.TensorModelParallelSize
	}
	return c.ExpertTensorParallelSize
}

// EffectiveMicrobatchGroupSize returns MicrobatchGroupSizePerVPStage, or
// PipelineModelParallelSize when it is unset (the reference's default).
func (c ModelParallelConfig) EffectiveMicrobatchGroupSize() int {
	if c.MicrobatchGroupSizePerVPStage == 0 {
		return c.PipelineModelParallelSize
	}
	return c.MicrobatchGroupSizePerVPStage
}

// EffectiveAutocastDType returns AutocastDType, or ParamsDType when it is
// unset (the reference's default).
func (c ModelParallelConfig) EffectiveAutocastDType() DType {
	if c.AutocastDType == DTypeNone {
		return c.ParamsDType
	}
	return c.AutocastDType
}

// Finalize applies the reference's defaulting rules (its __post_init__):
//
//	expert_tensor_parallel_size        ← tensor_model_parallel_size   if unset
//	gtp_weight_remat_size              ← tensor_parallel_num_weight_shards / tp   if shards set and divisible
//	expert_gtp_weight_remat_size       ← expert shards / etp          likewise
//	autocast_dtype                     ← params_dtype                 if unset
//	microbatch_group_size_per_vp_stage ← pipeline_model_parallel_size if unset
//
// It never fails and is idempotent; settings it cannot reconcile are left for
// Validate to report. The derivations read the values as they are, so call
// Finalize after setting the sizes.
func (c *ModelParallelConfig) Finalize() {
	if c.ExpertTensorParallelSize == 0 {
		c.ExpertTensorParallelSize = c.TensorModelParallelSize
	}
	if g, ok := gtpRematSize(c.TensorModelParallelSize, c.TensorParallelNumWeightShards); ok {
		c.GTPWeightRematSize = g
	}
	if g, ok := gtpRematSize(c.ExpertTensorParallelSize, c.ExpertTensorParallelNumWeightShards); ok {
		c.ExpertGTPWeightRematSize = g
	}
	if c.AutocastDType == DTypeNone {
		c.AutocastDType = c.ParamsDType
	}
	if c.MicrobatchGroupSizePerVPStage == 0 {
		c.MicrobatchGroupSizePerVPStage = c.PipelineModelParallelSize
	}
}

// gtpRematSize returns shards/tp when shards is set (> 0) and a positive
// multiple of tp ≥ 1; ok is false otherwise.
func gtpRematSize(tp, shards int) (g int, ok bool) {
	if shards <= 0 || tp <= 0 || shards < tp || shards%tp != 0 {
		return 0, false
	}
	return shards / tp, true
}
