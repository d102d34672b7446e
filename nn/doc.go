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
//
// # Mixed precision
//
// A parameter's Value may be bfloat16 or float16 (--bf16, --fp16);
// activations and their gradients stay float32. A GEMM with a 16-bit weight
// rounds its other operand to the weight's type once (GemmInput: x in
// forward, which is also what is saved for backward, and dy in backward)
// and accumulates in float32 (tensor.Gemm). Every other use of a parameter
// widens it exactly to float32 (layer norm, biases, the embedding rows
// looked up). Parameter gradients are accumulated through AccumulateGrad:
// into a float32 Grad (allocated as float32 when nil) directly, into a
// 16-bit Grad as round(Grad + contribution), one rounding per element per
// pass.
package nn
