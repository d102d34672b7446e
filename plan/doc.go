// Package plan says what a layout costs before it runs: the memory model
// the up-front check of every run uses (Memory: weights, gradients,
// optimizer state, the activations of the schedule's micro-batches in
// flight, the attention's scratch and a save's copy of the state, for the
// ranks of one machine), and the measurement `gotron inspect memory`
// prints beside it (MeasureActivations: the tape's activation bytes of one
// micro-batch under TP, SP, CP and recompute, with gotron's formula and
// Korthikanti et al. 2022's).
//
// It is meant to grow into a planner at cluster scale whose predictions
// come from this same model; today it covers one machine.
package plan
