package train

import (
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/pp"
)

// ramp returns the ramp when it is set, well formed and ramps
// (data.Ramp.Ramps; validateRamp reports the malformed ones, taken until
// then as a constant batch).
func (a Args) ramp() (data.Ramp, bool) {
	return a.RampupBatchSize, a.RampupBatchSize.Ramps(a.GlobalBatchSize)
}

// GlobalBatchAt returns the global batch of the iteration that begins
// after consumed samples.
func (a Args) GlobalBatchAt(consumed int64) int {
	return a.RampupBatchSize.GlobalBatch(a.GlobalBatchSize, consumed)
}

// stepAt returns the data step of iteration it, which begins after
// consumed samples.
func (a Args) stepAt(it int, consumed int64) data.Step {
	return data.Step{Index: it, Rows: a.GlobalBatchAt(consumed), Consumed: consumed}
}

// iterationsFor returns the iterations that --train-samples trains
// (data.Ramp.Iterations).
func (a Args) iterationsFor(samples int64) int {
	return a.RampupBatchSize.Iterations(a.GlobalBatchSize, samples)
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
	case r.Increments(a.GlobalBatchSize) > data.MaxRampIncrements:
		add("%s %d %d %d: %d increments, more than %d: use a larger increment", flag, r.Start, r.Increment, r.Samples, r.Increments(a.GlobalBatchSize), data.MaxRampIncrements)
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
