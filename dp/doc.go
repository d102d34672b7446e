// Package dp is gotron's data parallelism: Megatron's
// DistributedDataParallel wrapper, its parameter and gradient buffers and
// buckets, and finalize_model_grads.
//
// A model chunk's parameters live in one contiguous Buffer (values and
// gradients, each parameter a view), laid out in the reverse of their
// registration order — roughly the order backward completes their
// gradients — and cut into buckets (Layout: DefaultLayout, or
// DistOptLayout with the distributed optimizer's padding). Each bucket's
// gradients are reduced over the data-parallel group (dp·cp) by one
// collective: an all-reduce, or under the distributed optimizer a
// reduce-scatter that leaves each rank the reduced shard it owns
// (Layout.Shard). Without overlap_grad_reduce there is one bucket and one
// synchronous reduction in FinishGradSync; with it, each bucket's
// reduction is launched asynchronously by the parameters' grad hooks the
// moment its last gradient of the last microbatch is complete (NoSync
// marks the others), and FinishGradSync waits. Gradients are pre-scaled by
// 1/(dp·cp), or averaged in the collective (average_in_collective), or
// left as sums for the per-token loss.
//
// The distributed optimizer (package optim) updates each rank's shards and
// the wrapper all-gathers the parameters (StartParamSync), at once or, with
// overlap_param_gather, bucket by bucket from a forward pre-hook
// (ParamPreHook) as the next forward pass reaches them.
package dp
