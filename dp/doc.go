// Package dp is gotron's data parallelism: Megatron's
// DistributedDataParallel wrapper, its contiguous gradient buffer, and the
// data-parallel part of finalize_model_grads.
//
// Every parameter's gradient (Megatron's main_grad) is a view into one
// contiguous fp32 buffer, laid out in reverse parameter order (the order in
// which backward produces gradients), so the whole buffer is reduced with
// one collective. In this basic form, FinishGradSync runs one synchronous
// all-reduce of the buffer over the data-parallel group (dp×cp), pre-scaled
// by 1/(dp·cp), or averaged inside the collective with
// average_in_collective.
package dp
