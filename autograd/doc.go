// Package autograd is gotron's reverse-mode automatic differentiation.
//
// A Tape belongs to one rank: it carries the rank's context.Context (for the
// collectives that run inside backward), the no-grad switch and the first
// error met. Operations are Functions applied with Apply: each runs its Go
// Forward eagerly and, when gradients are wanted, links a node to its
// inputs, so the graph is built as the forward runs. Backward(out, grad)
// walks the graph from any node with a gradient given from outside (what
// pipeline schedules need, as Megatron's custom_backward), accumulates the
// gradients of leaf variables (parameters) into Var.Grad, runs each leaf's
// hooks once its gradient for the pass is complete (what data-parallel
// gradient reduction needs), and frees every saved tensor as it goes.
//
// Errors from a Function (a failed collective, say) stick to the Tape: later
// operations are skipped and Tape.Err reports the first cause, so model code
// reads as straight-line math and checks the error once.
package autograd
