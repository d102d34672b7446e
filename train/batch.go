package train

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/pp"
)

// resumePoint is where a checkpoint left a run: its iteration and the
// samples consumed before it.
type resumePoint struct {
	iteration int
	consumed  int64
}

// stepSchedule returns --step-batch-size-schedule, its thresholds in
// samples of this run's sequence length; nil when unset or malformed
// (validateSteps reports the malformed).
func (a Args) stepSchedule() data.StepSchedule {
	if a.StepBatchSizeSchedule == "" {
		return nil
	}
	s, err := data.ParseStepSchedule(a.StepBatchSizeSchedule, a.Model.SeqLength)
	if err != nil {
		return nil
	}
	return s
}

// ramp returns the ramp when it is set, well formed and ramps
// (data.Ramp.Ramps; validateRamp reports the malformed ones, taken until
// then as a constant batch).
func (a Args) ramp() (data.Ramp, bool) {
	return a.RampupBatchSize, a.RampupBatchSize.Ramps(a.GlobalBatchSize)
}

// GlobalBatchAt returns the global batch of the iteration that begins
// after consumed samples.
func (a Args) GlobalBatchAt(consumed int64) int {
	if s := a.stepSchedule(); s != nil {
		return s.GlobalBatch(consumed)
	}
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
	if s := a.stepSchedule(); s != nil {
		return s.Iterations(samples)
	}
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

// reachedBatches returns the global batches the run's iterations have,
// each once, in the order the run meets them, from the checkpoint it
// resumes (a step schedule's entries before it are not reached again:
// Megatron's scale-up mid-run); nil when the run's length or batch is
// not known (checkLength and checkBatch report why).
func (a Args) reachedBatches() []int {
	s := a.stepSchedule()
	if s == nil {
		return nil
	}
	var out []int
	s.Run(a.resumedAt.consumed, a.TrainIters-a.resumedAt.iteration, func(b, _ int) {
		if len(out) == 0 || out[len(out)-1] != b {
			out = append(out, b)
		}
	})
	return out
}

// trainSamplesNeeded returns the samples the run's --train-iters consume
// (TrainIters global batches; the step schedule's sum of them).
func (a Args) trainSamplesNeeded() int64 {
	if s := a.stepSchedule(); s != nil {
		return s.Run(0, a.TrainIters, nil)
	}
	return int64(a.TrainIters) * int64(a.GlobalBatchSize)
}

// largestBatch returns the largest global batch of the run (its
// micro-batches in flight bound the memory).
func (a Args) largestBatch() int {
	g := a.GlobalBatchSize
	for _, b := range a.reachedBatches() {
		g = max(g, b)
	}
	return g
}

// smallestBatch returns the smallest global batch of the run: the first
// under a ramp, the smallest a step schedule reaches.
func (a Args) smallestBatch() int {
	g := a.GlobalBatchAt(0)
	if r := a.reachedBatches(); len(r) > 0 {
		g = slices.Min(r)
	}
	return g
}

// validateSteps lists what is wrong with --step-batch-size-schedule: its
// text, the flags it replaces, and each batch the run reaches against
// micro × dp and the interleaved schedule (the reference checks only the
// current batch, at the iteration that reaches it).
func (a Args) validateSteps(dp int, add func(format string, args ...any)) {
	const flag = "--step-batch-size-schedule"
	if a.StepBatchSizeSchedule == "" {
		return
	}
	s, err := data.ParseStepSchedule(a.StepBatchSizeSchedule, a.Model.SeqLength)
	if err != nil {
		add("%s %q: %v (thresholds count tokens, of --seq-length %d each)", flag, a.StepBatchSizeSchedule, err, a.Model.SeqLength)
		return
	}
	if a.RampupBatchSize.On() {
		add("--rampup-batch-size and %s both set the batch of each iteration: give one (Megatron deprecates --rampup-batch-size for the schedule)", flag)
	}
	if a.GlobalBatchSize != s.Last() {
		add("--global-batch-size %d and %s, whose last batch is %d: the schedule sets every iteration's batch; drop --global-batch-size or make it %d", a.GlobalBatchSize, flag, s.Last(), s.Last())
		return
	}
	if !a.rowsOK(dp) {
		return
	}
	rows := a.MicroBatchSize * dp
	mp := a.Model.ModelParallelConfig
	reached := a.reachedBatches()
	if a.EvalIters > 0 {
		reached = append(reached, s.Last()) // the evaluation's batch
	}
	for _, b := range reached {
		if b%rows != 0 {
			add("%s: the global batch %d is not a multiple of --micro-batch-size × data-parallel size = %d × %d = %d: make every batch the run reaches a multiple of %d",
				flag, b, a.MicroBatchSize, dp, rows, rows)
			return
		}
		if mp.PipelineModelParallelSize > 1 && mp.VirtualPipelineModelParallelSize > 0 && pp.PlacementOf(a.PipelineSchedule) == config.PlacementLoop {
			if err := pp.ValidateInterleaved(mp.PipelineModelParallelSize, b/rows, mp.EffectiveMicrobatchGroupSize()); err != nil {
				add("%s: the global batch %d is %d microbatches: %v (choose batches the interleaved schedule can run)", flag, b, b/rows, err)
				return
			}
		}
	}
}

// stepsDesc describes the step schedule for the start-up line.
func stepsDesc(s data.StepSchedule, seqLength, rows, micro int) string {
	parts := make([]string, len(s))
	lo, hi := s[0].Batch, s[0].Batch
	for i, e := range s {
		parts[i] = fmt.Sprintf("%d from sample %d", e.Batch, e.From)
		if seqLength > 0 && e.From > 0 {
			parts[i] += fmt.Sprintf(" (token %d)", e.From*int64(seqLength))
		}
		lo, hi = min(lo, e.Batch), max(hi, e.Batch)
	}
	return fmt.Sprintf("global batch by --step-batch-size-schedule: %s: %d to %d micro-batches of %d per rank per iteration",
		strings.Join(parts, ", "), lo/rows, hi/rows, micro)
}
