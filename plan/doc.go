// Package plan says what a layout costs before it runs.
//
// On this machine: the memory model the up-front check of every run uses
// (Memory: weights, gradients, optimizer state, the activations of the
// schedule's micro-batches in flight, the attention's scratch and a save's
// copy of the state, for the ranks of one machine), and the measurement
// `gotron inspect memory` prints beside it (MeasureActivations: the tape's
// activation bytes of one micro-batch under TP, SP, CP and recompute, with
// gotron's formula and Korthikanti et al. 2022's).
//
// At cluster scale: Predict, behind `gotron plan`, prices one iteration of
// a run on a Hardware description (plan/hardware/*.json: peaks, memory,
// links, efficiencies) — each model chunk's forward, input-gradient and
// weight-gradient times from its FLOPs and bytes, every pipeline rank's
// real action list (pp.BuildAll, pp.Verify) played with them
// (pp.SimulateStages), the data-parallel reduction, the tied embedding's
// all-reduce and the optimizer after it — and each pipeline rank's memory
// from the same rules as Memory, with 16-bit activations. docs/PLAN.md
// describes the model and its accuracy against Korthikanti et al. 2022.
package plan
