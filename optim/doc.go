// Package optim holds gotron's optimizers: Adam with decoupled or L2
// weight decay (Megatron's default optimizer), or SGD with momentum
// (AdamConfig.SGD, torch.optim.SGD's arithmetic), over whole parameters
// or, as the distributed optimizer, over this rank's shards of the
// data-parallel gradient buffers (package dp); mixed precision (float32
// main parameters and gradients of 16-bit parameters) with constant or
// dynamic loss scaling; global gradient-norm clipping; and Megatron's
// OptimizerParamScheduler: the learning rate and the weight decay of each
// step (Schedule, Hyper).
//
// A training loop holds an Optimizer (NewPlain or NewDistributed) and
// calls it once the iteration's gradients are reduced: Prepare widens the
// 16-bit gradients into main gradients, unscales and checks them with the
// loss scaler on every rank (the scaler may skip the update) and returns
// the global gradient norm, summed as Options.Norm says; Update clips to
// it and updates the parameters, and the distributed optimizer then
// all-gathers them. Step does both. The step sequence, the scaler and the
// norm's groups live here, so the loop has no branch on which optimizer it
// holds.
package optim
