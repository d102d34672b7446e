// Package optim holds gotron's optimizer pieces: Adam with decoupled or
// L2 weight decay (Megatron's default optimizer), global gradient-norm
// clipping, and the learning-rate schedule of Megatron's
// OptimizerParamScheduler.
package optim
