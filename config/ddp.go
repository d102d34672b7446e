package config

// DDPConfig configures gotron's data-parallel wrapper, its gradient buffers
// and buckets, and the distributed optimizer's sharding: Megatron-Core's
// DistributedDataParallelConfig
// (megatron/core/distributed/distributed_data_parallel_config.py,
// core_v0.19), every field, in the same order, with Go names. JSON keys are
// the reference's names.
//
// Build one with DefaultDDPConfig, change what you need, then call Validate
// (and ValidateTogether / ValidateWorld once the model-parallel config and
// the world size are known).
//
// BucketSize, NumBuckets and SuggestedCommunicationUnitSize use 0 for the
// reference's None ("not set"). Megatron-FSDP (version 1) is provided with
// its four sharding strategies (UseMegatronFSDP,
// DataParallelShardingStrategy, SuggestedCommunicationUnitSize; package
// dp's FSDP) and hybrid sharding (HSDP, HFSDP). Its double buffers, NCCL
// userbuffers and fp8/fp4 parameter gathers are present so that
// configurations carry over;
// a non-default value is a validation error (DECISIONS.md). Their doc
// comments say "Not provided".
type DDPConfig struct {
	// GradReduceInFP32 keeps the gradient buffers, and reduces them, in
	// float32 whatever the parameter type.
	GradReduceInFP32 bool `json:"grad_reduce_in_fp32"`

	// OverlapGradReduce launches each bucket's all-reduce (or reduce-scatter)
	// asynchronously as soon as its gradients are ready during the last
	// microbatch's backward, instead of one synchronous reduction in finalize.
	// When false there is no bucketing (see EffectiveBucketSize).
	OverlapGradReduce bool `json:"overlap_grad_reduce"`

	// OverlapParamGather launches the distributed optimizer's parameter
	// all-gathers asynchronously and waits for each bucket in a forward
	// pre-hook. Requires UseDistributedOptimizer and OverlapGradReduce.
	OverlapParamGather bool `json:"overlap_param_gather"`

	// AlignParamGather makes the interleaved schedule launch the parameter
	// all-gathers of all pipeline stages together (through ParamSyncFunc),
	// instead of each stage on its own. Requires the interleaved schedule.
	AlignParamGather bool `json:"align_param_gather"`

	// UseDistributedOptimizer reduce-scatters gradients into dp equal shards
	// (one per data-parallel rank, which owns that shard's optimizer state)
	// and all-gathers the updated parameters, instead of all-reducing; buffers
	// are padded so every bucket divides by dp (docs/SEMANTICS.md § DDP
	// buffers and buckets).
	UseDistributedOptimizer bool `json:"use_distributed_optimizer"`

	// NumDistributedOptimizerInstances is the number of distributed-optimizer
	// replicas (partial DistOpt): gradients are reduce-scattered within an
	// instance of (dp·cp)/instances ranks, then the shards are all-reduced
	// across instances. Must be ≥ 1 and divide dp·cp; > 1 requires
	// UseDistributedOptimizer. Default 1.
	NumDistributedOptimizerInstances int `json:"num_distributed_optimizer_instances"`

	// CheckForNaNInGrad checks each bucket's gradients for NaN and Inf before
	// the collective.
	CheckForNaNInGrad bool `json:"check_for_nan_in_grad"`

	// CheckForLargeGrads checks each bucket's gradients for unexpectedly large
	// values before the collective.
	CheckForLargeGrads bool `json:"check_for_large_grads"`

	// BucketSize is the target number of elements per gradient bucket. 0
	// means unset: the default max(40_000_000, 1_000_000·dp·cp)
	// (DECISIONS.md). Exclusive with NumBuckets. See EffectiveBucketSize.
	BucketSize int `json:"bucket_size,omitempty"`

	// NumBuckets asks for this many buckets instead of a bucket size: the
	// size becomes num_params / NumBuckets. 0 means unset. Exclusive with
	// BucketSize. See ResolveBucketSize.
	NumBuckets int `json:"num_buckets,omitempty"`

	// PadBucketsForHighNCCLBusBW pads each bucket end to a multiple of
	// lcm(dp, 128, 65536) instead of lcm(dp, 128) under the distributed
	// optimizer. gotron keeps the arithmetic so that buffer layouts match the
	// reference's.
	PadBucketsForHighNCCLBusBW bool `json:"pad_buckets_for_high_nccl_busbw"`

	// ReduceScatterWithFP32Accumulation implements the reduce-scatter as an
	// all-to-all of the low-precision gradients followed by a local float32
	// sum. Not allowed with NumDistributedOptimizerInstances > 1.
	ReduceScatterWithFP32Accumulation bool `json:"reduce_scatter_with_fp32_accumulation"`

	// ParamNamePatternsForFP32LocalAccumulation lists parameter-name patterns
	// (shell-style, as Python's fnmatch; "all" matches every parameter) whose
	// gradients accumulate in a separate float32 main_grad, copied to and from
	// the communication buffer around the collective. Must be empty when
	// GradReduceInFP32 is set (the buffers are float32 already).
	ParamNamePatternsForFP32LocalAccumulation []string `json:"param_name_patterns_for_fp32_local_accumulation,omitempty"`

	// AverageInCollective averages in the collective (ReduceOp AVG) instead
	// of scaling gradients by 1/dp before a sum. Not allowed with per-token
	// loss (calculate_per_token_loss).
	AverageInCollective bool `json:"average_in_collective"`

	// FP8ParamGather all-gathers parameters in fp8. Not provided: must stay
	// false.
	FP8ParamGather bool `json:"fp8_param_gather"`

	// FP4ParamGather all-gathers parameters in fp4. Not provided: must stay
	// false.
	FP4ParamGather bool `json:"fp4_param_gather"`

	// ReuseGradBufForMXFP8ParamAG reuses the gradient buffer for MXFP8
	// parameter all-gathers; requires FP8ParamGather. Not provided: must stay
	// false.
	ReuseGradBufForMXFP8ParamAG bool `json:"reuse_grad_buf_for_mxfp8_param_ag"`

	// UseMegatronFSDP selects Megatron-FSDP: the parameters, gradients and
	// optimizer state sharded over the data-parallel ranks as
	// DataParallelShardingStrategy says. Finalize turns on what the
	// reference forces with it: the distributed optimizer, and for the
	// gradient-sharding strategies overlap_grad_reduce (and
	// overlap_param_gather with optim_grads_params).
	UseMegatronFSDP bool `json:"use_megatron_fsdp"`

	// MegatronFSDPVersion is the Megatron-FSDP implementation, 1 or 2.
	// Version 2 is not provided: must stay 1 (the default).
	MegatronFSDPVersion int `json:"megatron_fsdp_version"`

	// UseCustomFSDP is the deprecated name of UseMegatronFSDP; Finalize
	// sets each from the other.
	UseCustomFSDP bool `json:"use_custom_fsdp"`

	// DataParallelShardingStrategy is Megatron-FSDP's sharding strategy:
	// "no_shard" (plain DDP: everything whole on every rank), "optim"
	// (ZeRO-1: the optimizer state sharded), "optim_grads" (ZeRO-2: the
	// gradients too, reduce-scattered after every micro-batch) or
	// "optim_grads_params" (ZeRO-3: the parameters too, gathered for the
	// forward and backward of each decoder layer). Anything but "no_shard"
	// needs UseMegatronFSDP.
	DataParallelShardingStrategy string `json:"data_parallel_sharding_strategy"`

	// GradientReduceDivFusion fuses the 1/dp division into the reduction
	// (used by the FSDP path). Accepted and a no-op: gotron's buffers scale
	// before or in the collective as AverageInCollective says. Default true.
	GradientReduceDivFusion bool `json:"gradient_reduce_div_fusion"`

	// SuggestedCommunicationUnitSize is Megatron-FSDP's communication unit,
	// in elements, under optim_grads and optim_grads_params: parameter
	// gathers are prefetched ahead of the layer being computed until the
	// prefetched units hold half of it (at least one unit), and at most
	// that many gradient elements are reduced in flight. 0 means unset:
	// twice the average unit.
	SuggestedCommunicationUnitSize int `json:"suggested_communication_unit_size,omitempty"`

	// KeepFP8TransposeCache keeps Megatron-FSDP's fp8 transpose cache. Not
	// provided: must stay false.
	KeepFP8TransposeCache bool `json:"keep_fp8_transpose_cache"`

	// NCCLUB registers the buffers as NCCL userbuffers. Not provided: must
	// stay false.
	NCCLUB bool `json:"nccl_ub"`

	// FSDPDoubleBuffer uses persistent FSDP double buffers. Not provided:
	// must stay false.
	FSDPDoubleBuffer bool `json:"fsdp_double_buffer"`

	// FSDPDBUsePersistBufOnAllocFail falls back to persistent FSDP buffers.
	// Not provided: must stay false.
	FSDPDBUsePersistBufOnAllocFail bool `json:"fsdp_db_use_persist_buf_on_alloc_fail"`

	// FSDPAllGatherInStartParamSync all-gathers in Megatron-FSDP's first
	// parameter sync. Not provided: must stay true (the default).
	FSDPAllGatherInStartParamSync bool `json:"fsdp_all_gather_in_start_param_sync"`

	// OuterDPShardingStrategy is hybrid Megatron-FSDP's strategy across
	// the NumDistributedOptimizerInstances instances: "no_shard" (the
	// default; HSDP, the gradient shards all-reduced across them) or
	// "optim" (HFSDP, with optim_grads_params: the optimizer state split
	// across them too).
	OuterDPShardingStrategy string `json:"outer_dp_sharding_strategy"`

	// DisableSymmetricRegistration turns off NCCL symmetric userbuffer
	// registration. Not provided: must stay false.
	DisableSymmetricRegistration bool `json:"disable_symmetric_registration"`

	// FSDPManualRegistration registers FSDP buffers with NCCL by hand. Not
	// provided: must stay false.
	FSDPManualRegistration bool `json:"fsdp_manual_registration"`

	// DelayWgradCompute has DDP's hooks wait for weight gradients that
	// ModelParallelConfig.DelayWgradCompute delays. Not provided: must stay
	// false.
	DelayWgradCompute bool `json:"delay_wgrad_compute"`

	// MegatronFSDPMainParamsDType is Megatron-FSDP's main-parameter type.
	// Not provided: must stay Float32 (the default).
	MegatronFSDPMainParamsDType DType `json:"megatron_fsdp_main_params_dtype"`

	// MegatronFSDPMainGradsDType is Megatron-FSDP's main-gradient type. Not
	// provided: must stay DTypeNone (the default).
	MegatronFSDPMainGradsDType DType `json:"megatron_fsdp_main_grads_dtype,omitempty"`

	// MegatronFSDPGradCommDType is Megatron-FSDP's gradient communication
	// type. Not provided: must stay DTypeNone (the default).
	MegatronFSDPGradCommDType DType `json:"megatron_fsdp_grad_comm_dtype,omitempty"`

	// MegatronFSDPUseDecoupledGrad uses Megatron-FSDP's decoupled gradients.
	// Not provided: must stay false.
	MegatronFSDPUseDecoupledGrad bool `json:"megatron_fsdp_use_decoupled_grad"`

	// MegatronFSDPCUDAGraphMode makes Megatron-FSDP CUDA-graph safe. Not
	// provided: must stay false.
	MegatronFSDPCUDAGraphMode bool `json:"megatron_fsdp_cuda_graph_mode"`

	// MegatronFSDPEnableFineGrainedParamGather gathers Megatron-FSDP
	// parameters at a finer grain. Not provided: must stay false.
	MegatronFSDPEnableFineGrainedParamGather bool `json:"megatron_fsdp_enable_fine_grained_param_gather"`

	// MegatronFSDPMaxPoolDoubleBuffer uses a max-pool FSDP double buffer and
	// implies FSDPDoubleBuffer (applied by Finalize). Not provided: must stay
	// false.
	MegatronFSDPMaxPoolDoubleBuffer bool `json:"megatron_fsdp_max_pool_double_buffer"`
}

// DefaultDDPConfig returns Megatron-Core's defaults: everything off or unset
// except num_distributed_optimizer_instances = 1, megatron_fsdp_version = 1,
// data_parallel_sharding_strategy and outer_dp_sharding_strategy "no_shard",
// gradient_reduce_div_fusion and fsdp_all_gather_in_start_param_sync true,
// and megatron_fsdp_main_params_dtype float32.
func DefaultDDPConfig() DDPConfig {
	return DDPConfig{
		NumDistributedOptimizerInstances: 1,
		MegatronFSDPVersion:              1,
		DataParallelShardingStrategy:     "no_shard",
		GradientReduceDivFusion:          true,
		FSDPAllGatherInStartParamSync:    true,
		OuterDPShardingStrategy:          "no_shard",
		MegatronFSDPMainParamsDType:      Float32,
	}
}

// Finalize applies the reference's defaulting rules:
// megatron_fsdp_max_pool_double_buffer implies fsdp_double_buffer
// (DistributedDataParallelConfig.__post_init__; Validate rejects both), and
// Megatron-FSDP's (megatron/training/arguments.py and the FSDP wrapper's
// constructor): use_custom_fsdp and use_megatron_fsdp name one switch,
// which turns on the distributed optimizer (the optimizer state sharded:
// every strategy but no_shard, which stays plain DDP); the gradient-sharding
// strategies turn on overlap_grad_reduce, and optim_grads_params
// overlap_param_gather (they reduce and gather unit by unit as the passes
// reach them). The bucket-size defaults the reference's DDP wrapper writes
// back into the config are computed by EffectiveBucketSize and
// ResolveBucketSize instead, without mutation.
func (c *DDPConfig) Finalize() {
	if c.MegatronFSDPMaxPoolDoubleBuffer {
		c.FSDPDoubleBuffer = true
	}
	if !c.MegatronFSDP() {
		return
	}
	c.UseMegatronFSDP, c.UseCustomFSDP = true, true
	if c.DataParallelShardingStrategy != NoShard {
		c.UseDistributedOptimizer = true
	}
	if c.ShardsGradients() {
		c.OverlapGradReduce = true
	}
	if c.ShardsParameters() {
		c.OverlapParamGather = true
	}
}

// Megatron-FSDP's data-parallel sharding strategies
// (DataParallelShardingStrategy, OuterDPShardingStrategy): DDP, ZeRO-1,
// ZeRO-2 and ZeRO-3.
const (
	NoShard               = "no_shard"
	ShardOptim            = "optim"
	ShardOptimGrads       = "optim_grads"
	ShardOptimGradsParams = "optim_grads_params"
)

// MegatronFSDP reports whether Megatron-FSDP is on (use_megatron_fsdp or
// its deprecated name use_custom_fsdp).
func (c DDPConfig) MegatronFSDP() bool { return c.UseMegatronFSDP || c.UseCustomFSDP }

// ShardsGradients reports whether gradients are sharded between
// iterations: Megatron-FSDP with optim_grads or optim_grads_params, where
// each micro-batch's gradients are reduce-scattered into the rank's shard
// as its backward pass completes them.
func (c DDPConfig) ShardsGradients() bool {
	s := c.DataParallelShardingStrategy
	return c.MegatronFSDP() && (s == ShardOptimGrads || s == ShardOptimGradsParams)
}

// HybridShardsOptimizer reports whether hybrid Megatron-FSDP shards the
// optimizer state across its instances too (HFSDP: optim_grads_params
// inside each instance, outer_dp_sharding_strategy optim, more than one
// instance): each instance then holds only its pieces of it.
func (c DDPConfig) HybridShardsOptimizer() bool {
	return c.ShardsParameters() && c.OuterDPShardingStrategy == ShardOptim && c.NumDistributedOptimizerInstances > 1
}

// ShardsParameters reports whether the parameters are sharded between
// uses: Megatron-FSDP with optim_grads_params (ZeRO-3).
func (c DDPConfig) ShardsParameters() bool {
	return c.MegatronFSDP() && c.DataParallelShardingStrategy == ShardOptimGradsParams
}
