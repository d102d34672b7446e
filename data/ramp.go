package data

import "math/bits"

// MaxRampIncrements bounds the steps of a batch-size ramp: (global −
// start) / increment. Real ramps have tens to hundreds.
const MaxRampIncrements = 1 << 20

// Ramp is --rampup-batch-size START INCREMENT SAMPLES, Megatron's
// ramp-up of the global batch (its
// RampupBatchsizeNumMicroBatchesCalculator): the first samples of the run
// are consumed in global batches that grow from Start by Increment up to
// --global-batch-size, over Samples samples. With n = (global − Start) /
// Increment increments, the global batch of an iteration that begins
// after c samples is
//
//	Start + min(n, ⌊c·n / Samples⌋)·Increment
//
// computed exactly (the reference divides c by the float Samples/n, the
// same integer but for rounding at a boundary). The zero Ramp is none: the
// global batch is constant.
type Ramp struct{ Start, Increment, Samples int }

// On reports whether a ramp is set.
func (r Ramp) On() bool { return r != Ramp{} }

// Increments returns n = (global − Start) / Increment (0 for a ramp
// without a positive increment).
func (r Ramp) Increments(global int) int {
	if r.Increment <= 0 {
		return 0
	}
	return (global - r.Start) / r.Increment
}

// Ramps reports whether r is set, well formed and ramps up to the global
// batch global (a start equal to it does not); a ramp that does not is
// taken as a constant batch.
func (r Ramp) Ramps(global int) bool {
	return r.Start > 0 && r.Increment > 0 && r.Samples > 0 && r.Start < global &&
		(global-r.Start)%r.Increment == 0 && r.Increments(global) <= MaxRampIncrements
}

// GlobalBatch returns the global batch of the iteration that begins after
// consumed samples, global once the ramp is over (or without one).
func (r Ramp) GlobalBatch(global int, consumed int64) int {
	g := global
	if !r.Ramps(g) || consumed >= int64(r.Samples) {
		return g
	}
	n := r.Increments(g)
	hi, lo := bits.Mul64(uint64(consumed), uint64(n))
	k, _ := bits.Div64(hi, lo, uint64(r.Samples)) // < n: consumed < Samples
	return r.Start + int(k)*r.Increment
}

// Iterations returns the iterations that samples train at global batch
// global (--train-samples): as many global batches as fit wholly in
// samples (a partial last batch is dropped, as Megatron drops it at a
// constant batch), the ramp's batches first. It runs in one step per
// distinct batch size.
func (r Ramp) Iterations(global int, samples int64) int {
	if global <= 0 {
		return 0
	}
	ok := r.Ramps(global)
	var c int64
	iters := 0
	for {
		b := int64(r.GlobalBatch(global, c))
		if !ok || c >= int64(r.Samples) {
			return iters + int((samples-c)/b)
		}
		// The batch stays b until c reaches the next boundary
		// ⌈(k+1)·Samples/n⌉ (the last one is the ramp's end).
		n := uint64(r.Increments(global))
		k := uint64(int(b)-r.Start) / uint64(r.Increment)
		hi, lo := bits.Mul64(k+1, uint64(r.Samples))
		lo, carry := bits.Add64(lo, n-1, 0)
		next, _ := bits.Div64(hi+carry, lo, n)
		steps := (int64(next)-c-1)/b + 1 // ⌈(next − c)/b⌉, next > c, without overflow
		if fit := (samples - c) / b; fit < steps {
			return iters + int(fit)
		}
		iters += int(steps)
		c += steps * b
	}
}
