// Package nn holds gotron's differentiable layers: parameters named as
// Megatron names them, and fused Functions for linear, layer norm, GELU,
// embedding, causal attention, cross entropy and dropout.
//
// Activations follow Megatron's sequence-first layout: a transformer
// activation is [s, b, h] (sequence, micro-batch, hidden), stored
// contiguously, so a sequence-parallel split is a split of the first
// dimension. Linear layers treat every leading dimension as rows.
//
// Each Function's Forward and Backward run fused Go loops (package kernels)
// or BLAS GEMMs (package blas) over contiguous memory.
package nn
