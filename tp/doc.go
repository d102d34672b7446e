// Package tp is gotron's tensor_parallel package: the layers, mappings,
// loss, random-number streams and activation checkpointing that split a
// transformer's weights and activations across a tensor-parallel group.
//
// It follows Megatron-Core's megatron/core/tensor_parallel (restated in
// docs/SEMANTICS.md, § Vocabulary split and weight initialisation through
// § broadcast_data) in Go form:
//
//   - mappings: forward/backward collective pairs as autograd Functions
//     (CopyToTensorModelParallelRegion, ReduceFromTensorModelParallelRegion,
//     ScatterToSequenceParallelRegion, ...). Each takes its group
//     explicitly and is the identity on a group of one rank (or a nil
//     group). The reference's old "_to_moe"/"_from_moe" variants are the same
//     functions called with the expert tensor-parallel group.
//   - layers: ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding
//     and LinearWithGradAccumulationAndAsyncAllreduce, whose input-gradient
//     all-reduce (or reduce-scatter under sequence parallelism) runs while
//     the weight-gradient GEMM computes.
//   - VocabParallelCrossEntropy, with label smoothing by the global formula
//     (the same loss for every TP size; see docs/DECISIONS.md).
//   - RNGStatesTracker, ModelParallelManualSeed, Checkpoint and
//     CheckpointWithoutOutput.
//   - BroadcastData, the VocabUtility functions
//     (VocabRangeFromPerPartitionVocabSize, VocabRangeFromGlobalVocabSize),
//     SplitTensorAlongLastDim, SplitTensorInto1DEqualChunks,
//     GatherSplit1DTensor, the parameter attribute helpers, and
//     GatherPartitioned/PartitionOf (whole tensors from TP partitions and
//     back, for checkpoints and gathered gradients).
//
// Activations are sequence-first, [s, b, h]; under sequence parallelism a
// rank holds [s/tp, b, h]. Shapes in comments use tp for the group's size.
package tp
