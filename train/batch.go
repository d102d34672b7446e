package train

import (
	"math/bits"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/pp"
)

// maxRampIncrements bounds the steps of a batch-size ramp: (global −
// start) / increment. Real ramps have tens to hundreds.
const maxRampIncrements = 1 << 20

// Ramp is --rampup-batch-size START INCREMENT SAMPLES, Megatron's
// ramp-up of the global batch: the first samples of the run are consumed
// in global batches that grow from Start by Increment up to
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

// increments returns n = (global − Start) / Increment.
func (r Ramp) increments(global int) int { return (global - r.Start) / r.Increment }

// ramp returns the ramp when it is set, well formed and ramps (a start
// equal to the global batch does not; validateRamp reports the malformed
// ones, taken until then as a constant batch).
func (a Args) ramp() (Ramp, bool) {
	r, g := a.RampupBatchSize, a.GlobalBatchSize
	ok := r.Start > 0 && r.Increment > 0 && r.Samples > 0 && r.Start < g &&
		(g-r.Start)%r.Increment == 0 && r.increments(g) <= maxRampIncrements
	return r, ok
}

// GlobalBatchAt returns the global batch of the iteration that begins
// after consumed samples.
func (a Args) GlobalBatchAt(consumed int64) int {
	r, ok := a.ramp()
	g := a.GlobalBatchSize
	if !ok || consumed >= int64(r.Samples) {
		return g
	}
	n := r.increments(g)
	hi, lo := bits.Mul64(uint64(consumed), uint64(n))
	k, _ := bits.Div64(hi, lo, uint64(r.Samples)) // < n: consumed < Samples
	return r.Start + int(k)*r.Increment
}

// stepAt returns the data step of iteration it, which begins after
// consumed samples.
func (a Args) stepAt(it int, consumed int64) data.Step {
	return data.Step{Index: it, Rows: a.GlobalBatchAt(consumed), Consumed: consumed}
}

// iterationsFor returns the iterations that --train-samples trains: as
// many global batches as fit wholly in samples (a partial last batch is
// dropped, as Megatron drops it at a constant batch), the ramp's batches
// first. It runs in one step per distinct batch size.
func (a Args) iterationsFor(samples int64) int {
	if a.GlobalBatchSize <= 0 {
		return 0
	}
	r, ok := a.ramp()
	var c int64
	iters := 0
	for {
		b := int64(a.GlobalBatchAt(c))
		if !ok || c >= int64(r.Samples) {
			return iters + int((samples-c)/b)
		}
		// The batch stays b until c reaches the next boundary
		// ⌈(k+1)·Samples/n⌉ (the last one is the ramp's end).
		n := uint64(r.increments(a.GlobalBatchSize))
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

// validateRamp lists what is wrong with --rampup-batch-size.
func (a Args) validateRamp(dp int, add func(format string, args ...any)) {
	r := a.RampupBatchSize
	if !r.On() {
		return
	}
	const flag = "--rampup-batch-size"
	switch {
	case r.Start <= 0 || r.Increment <= 0 || r.Samples <= 0:
		add("%s %d %d %d: the start, the increment and the ramp's samples must be positive", flag, r.Start, r.Increment, r.Samples)
		return
	case r.Start > a.GlobalBatchSize:
		add("%s %d %d %d: the start is above --global-batch-size %d: the ramp grows the batch up to it", flag, r.Start, r.Increment, r.Samples, a.GlobalBatchSize)
		return
	case (a.GlobalBatchSize-r.Start)%r.Increment != 0:
		add("%s %d %d %d: --global-batch-size %d minus the start is not a multiple of the increment %d: the ramp must end on the global batch",
			flag, r.Start, r.Increment, r.Samples, a.GlobalBatchSize, r.Increment)
		return
	case r.increments(a.GlobalBatchSize) > maxRampIncrements:
		add("%s %d %d %d: %d increments, more than %d: use a larger increment", flag, r.Start, r.Increment, r.Samples, r.increments(a.GlobalBatchSize), maxRampIncrements)
		return
	}
	rows := a.MicroBatchSize * dp
	if rows > 0 && (r.Start%rows != 0 || r.Increment%rows != 0) {
		add("%s %d %d %d: every global batch of the ramp must be a multiple of --micro-batch-size × data-parallel size = %d: choose a start and an increment that are",
			flag, r.Start, r.Increment, r.Samples, rows)
	} else if mp := a.Model.ModelParallelConfig; rows > 0 && mp.PipelineModelParallelSize > 1 && mp.VirtualPipelineModelParallelSize > 0 {
		for b := r.Start; b < a.GlobalBatchSize; b += r.Increment {
			if err := pp.ValidateInterleaved(mp.PipelineModelParallelSize, b/rows, mp.EffectiveMicrobatchGroupSize()); err != nil {
				add("%s %d %d %d: the ramp's global batch %d is %d microbatches: %v (choose a start and an increment whose batches the interleaved schedule can run)",
					flag, r.Start, r.Increment, r.Samples, b, b/rows, err)
				break
			}
		}
	}
	if a.TrainSamples <= 0 {
		add("%s ramps the batch over samples: train with --train-samples instead of --train-iters (as Megatron requires)", flag)
	}
}
