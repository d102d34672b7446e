// Package config holds gotron's configuration structs: ModelParallelConfig
// (parallel sizes, precision, pipeline-schedule settings and the callbacks the
// schedules use) and DDPConfig (data-parallel buckets, overlap and the
// distributed optimizer), with the transformer config beside them. They are
// Megatron-Core's ModelParallelConfig and DistributedDataParallelConfig
// (core_v0.19) field for field, with Go names (tensor_model_parallel_size is
// TensorModelParallelSize) and the reference's names as JSON keys, so that
// Megatron configurations carry over.
//
// # Lifecycle
//
// A config is a plain value, validated once; the rest of gotron trusts it.
//
//	mp := config.DefaultModelParallelConfig() // Megatron's defaults
//	mp.TensorModelParallelSize = 2
//	mp.PipelineModelParallelSize = 4
//	mp.PipelineDType = config.Float32
//	mp.Finalize()                             // derived defaults (etp ← tp, G ← pp, ...)
//	ddp := config.DefaultDDPConfig()
//	err := config.ValidateTogether(mp, ddp, false) // every rule of both, at once
//	err = config.ValidateWorld(16, mp, ddp)        // dp = 16/(2·4·1) = 2, ...
//
// The zero value of a config struct is not Megatron's default (several
// defaults are true or 1): start from DefaultModelParallelConfig and
// DefaultDDPConfig.
//
// # Validation
//
// Validate reports every violated rule at once, as a *ValidationError whose
// Violations each name the fields involved (by their Megatron names), the
// arithmetic with the actual numbers, and the fix. The rules are those of the
// reference's __post_init__ methods (docs/SEMANTICS.md § ModelParallelConfig
// checks, § DistributedDataParallelConfig checks), plus the ones the
// reference enforces late, in its schedules, its initialize_model_parallel,
// its DDP wrapper and its training layer, which gotron checks up front
// (DECISIONS.md). They are split by what they need:
//
//	ModelParallelConfig.Validate            the model-parallel config alone
//	DDPConfig.Validate                      the DDP config alone
//	ValidateTogether(mp, ddp, perTokenLoss) both, and the rules joining them
//	ValidateWorld(world, mp, ddp)           the world size (dp, edp, partial DistOpt)
//	ModelParallelConfig.ValidateMicrobatches the number of microbatches
//
// Advice the reference gives as a warning (expert parallelism with tensor
// parallelism but without sequence parallelism) comes from Warnings.
//
// # Pipeline split
//
// TransformerConfig.PipelineChunks says which decoder layers, embedding, MTP
// layers and loss each model chunk (pipeline rank p, virtual stage v) holds,
// whichever way the split is given: evenly, unevenly
// (num_layers_in_first/last_pipeline_stage), with the embedding and loss
// counted as layers (account_for_*_in_pipeline_split), or by a
// pipeline_model_parallel_layout string such as "Et*3|(tt|)*29,m|L"
// (ParsePipelineLayout, docs/SEMANTICS.md § Pipeline layout strings).
// ResolvePipelineLayout derives virtual_pipeline_model_parallel_size from the
// layout or from num_layers_per_virtual_pipeline_stage, as Megatron does;
// Validate checks the config as resolved.
//
// # The model's record
//
// TransformerConfig.Record lists, by JSON name, the model options that
// change a model's numbers beyond its shapes and differ from the
// defaults; a checkpoint keeps it, and ApplyRecord sets a config back
// from it (an option not listed returns to its default; an unknown one is
// an *UnknownOptionsError).
//
// # Unset values
//
// Optional integers whose reference default is None use 0 for "not set"
// (virtual_pipeline_model_parallel_size, expert_tensor_parallel_size,
// microbatch_group_size_per_vp_stage, bucket_size, num_buckets, ...); optional
// dtypes use DTypeNone; the callbacks use nil. Finalize fills in the derived
// defaults, and the Effective* methods read them without modifying the
// config.
//
// # What the CPU backend does not provide
//
// Settings for GPU machinery (Transformer Engine, fp8/fp4, userbuffers, NCCL
// registration, CUDA streams and graphs, APEX kernels, offloading,
// Megatron-FSDP) and the HEAD-only generalized tensor parallelism are kept so
// that configurations carry over, and a non-default value is a validation
// error that says so; none is silently ignored. Performance knobs without a
// CPU meaning (batch_p2p_sync, barrier_with_L1_time,
// pipeline_model_parallel_comm_backend, cross_entropy_loss_fusion,
// gradient_reduce_div_fusion) are accepted and documented as no-ops.
package config
