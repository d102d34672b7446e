// Package autograd is gotron's reverse-mode automatic differentiation.
//
// A Tape records one pass of one rank (an iteration's forward and
// backward, an evaluation, a sample), as an http.Request is one request:
// it carries that pass's context.Context (for the collectives that run
// inside forward and backward), the no-grad switch, the activation memory
// and the first error met. Make a new Tape for each pass, under that
// pass's context; a Tape kept across passes would run later collectives
// under an old context.
//
// Operations are Functions applied with Apply: each runs its Go Forward
// eagerly and, when gradients are wanted, links a node to its inputs, so
// the graph is built as the forward runs. Backward(out, grad)
// walks the graph from any node with a gradient given from outside (what
// pipeline schedules need, as Megatron's custom_backward), accumulates the
// gradients of leaf variables (parameters) into Var.Grad, runs each leaf's
// hooks once its gradient for the pass is complete (what data-parallel
// gradient reduction needs), and frees every saved tensor as it goes.
//
// BackwardSplit splits a backward pass as zero-bubble pipeline schedules
// need: the input gradients now, every parameter's gradient contributions
// (those the engine computes and those Functions add through
// Ctx.AccumulateParam, as the linear layers' weight-gradient GEMMs) queued
// in order on a WeightGrads that runs later, with the parameters' hooks
// waiting for it; the gradients are the unsplit pass's bit for bit.
//
// Errors from a Function (a failed collective, say) stick to the Tape: later
// operations are skipped and Tape.Err reports the first cause, so model code
// reads as straight-line math and checks the error once.
package autograd
