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
//
// # Megatron-FSDP
//
// FSDP is the other owner of a chunk's state, for Megatron-FSDP's
// optim_grads (ZeRO-2) and optim_grads_params (ZeRO-3) strategies: a unit
// per decoder layer, each unit's state padded and cut into dp shards;
// gradients reduce-scattered into float32 shards after every
// micro-batch, as soon as backward completes a unit; under ZeRO-3 each
// unit's parameters gathered for the forward and backward parts that use
// them (the model's PreHook and PostHook, and an autograd function behind
// each part's output) and released after (tensor.Tensor.Release). The
// trainer holds both behind Wrapper; the distributed optimizer updates the
// shards each Wrapper hands it (OptimizerShards).
//
// # Precision
//
// The parameters are stored in Options.ParamDType — float32, or bfloat16 /
// float16 for --bf16 / --fp16 — and the gradients in float32 under
// grad_reduce_in_fp32, else in the parameters' type (GradDTypeFor), as the
// reference's _ParamAndGradBuffer does. Every collective carries the
// buffer's type. With w(x) the exact widening of a 16-bit x and r(v) the
// rounding of a float32 v to nearest even, a 16-bit gradient buffer sees:
//
//	scaling by f (1/(dp·cp), scale_gradients)   g ← r(w(g)·f)
//	reduction over ranks 0 … n−1                 g ← r(w(g₀) + w(g₁) + … + w(g_{n−1}))
//	    (float32 sums left to right, one rounding; Avg divides the sum by n
//	    before rounding; reduce_scatter_with_fp32_accumulation gives the same
//	    numbers from an all-to-all of the 16-bit chunks and a local float32 sum)
//	float32 local gradient m (param_name_patterns_for_fp32_local_accumulation)
//	    g ← r(m) before the check, scaling and reduction; m ← w(g) after
//
// finalize_model_grads reduces gradients in their type too (float32 when a
// float32 local gradient is coalesced with 16-bit ones). A float32 buffer
// keeps float32 arithmetic throughout.
package dp
