// Package ckpt saves and loads gotron's training checkpoints.
//
// A checkpoint directory holds one sub-directory per saved iteration and a
// tracker file, as Megatron's do:
//
//	DIR/latest_checkpointed_iteration.txt      "20"
//	DIR/iter_0000020/model.safetensors         weights, Megatron names
//	DIR/iter_0000020/optimizer.safetensors     exp_avg.NAME, exp_avg_sq.NAME
//	DIR/iter_0000020/state.json                iteration, consumed samples,
//	                                           RNG state, optimizer step, args
//
// Saving is atomic: the iteration is written into a temporary directory,
// synced and renamed into place, and only then is the tracker replaced
// (write, sync, rename). A save that fails at any point leaves the previous
// checkpoint and tracker untouched.
package ckpt
