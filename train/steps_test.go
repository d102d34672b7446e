package train

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// stepArgs is mockArgs(iters) whose global batch follows the step schedule
// s (thresholds in tokens of 16-token sequences) instead of
// --global-batch-size.
func stepArgs(iters int, s string) Args {
	a := mockArgs(iters)
	a.GlobalBatchSize, a.StepBatchSizeSchedule = 0, s
	return a
}

// The schedule of the tests: 2 from sample 0, 4 from sample 4, 8 from
// sample 12 (thresholds in tokens, 16 per sample).
const testSteps = "0:2 64:4 192:8"

// TestStepScheduleLayoutsMatchSingleRank trains --step-batch-size-schedule
// (global batches 2, 2, 4, 4, 8, …) on one rank, on DP 2 with the
// distributed optimizer, on TP 2 and on PP 2: the losses equal the one
// rank's to 1e-6 relative, and the learning rate counts samples, an
// iteration of its flags being one of the last batch.
func TestStepScheduleLayoutsMatchSingleRank(t *testing.T) {
	base := stepArgs(10, testSteps)
	base.LogJSON = filepath.Join(t.TempDir(), "log.jsonl")
	want, err := Run(context.Background(), base, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, base.LogJSON)
	var batches []int
	for _, r := range recs {
		batches = append(batches, r.GlobalBatchSize)
	}
	if got := fmt.Sprint(batches); got != "[2 2 4 4 8 8 8 8 8 8]" || recs[len(recs)-1].ConsumedSamples != 60 {
		t.Fatalf("global batches %s, consumed %d", got, recs[len(recs)-1].ConsumedSamples)
	}
	// Warmup of 2 iterations of the last batch, 16 samples: after the
	// first step's 2 samples, an eighth of --lr.
	if lr := recs[1].LR; math.Abs(lr-base.LR/8) > 1e-15 {
		t.Errorf("second iteration's learning rate %g, want %g", lr, base.LR/8)
	}
	checkBatchLayouts(t, want, func() Args { return stepArgs(10, testSteps) })
}

// TestStepScheduleOfOneBatch: a schedule of one batch is --global-batch-size
// of it, bit for bit, though its learning rate counts samples (a linear
// decay with warmup, and a cosine one).
func TestStepScheduleOfOneBatch(t *testing.T) {
	for _, style := range []string{"linear", "cosine"} {
		a := mockArgs(8)
		a.LRDecayStyle, a.LRWarmupIters, a.LRDecayIters = style, 3, 7
		a.LogJSON = filepath.Join(t.TempDir(), "const.jsonl")
		want, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := a
		s.GlobalBatchSize, s.StepBatchSizeSchedule = 0, "0:8"
		s.LogJSON = filepath.Join(t.TempDir(), "steps.jsonl")
		got, err := Run(context.Background(), s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Losses) != fmt.Sprint(want.Losses) {
			t.Errorf("%s: losses %v, with --global-batch-size 8 %v", style, got.Losses, want.Losses)
		}
		wr, gr := readRecords(t, a.LogJSON), readRecords(t, s.LogJSON)
		for i := range wr {
			if gr[i].LR != wr[i].LR {
				t.Errorf("%s: iteration %d: learning rate %g, with --global-batch-size 8 %g", style, i+1, gr[i].LR, wr[i].LR)
			}
		}
	}
}

// TestStepScheduleResumes saves at iteration 3 (global batch 4) on DP 2
// and resumes: the losses are the uninterrupted run's bit for bit. A
// resume with another schedule is refused, naming both.
func TestStepScheduleResumes(t *testing.T) {
	a := stepArgs(8, testSteps)
	a.WorldSize = 2
	rest := checkResumes(t, a, 3)
	other := rest
	other.StepBatchSizeSchedule = "0:2 128:4 192:8"
	if _, err := Run(context.Background(), other, Options{}); err == nil ||
		!strings.Contains(err.Error(), `--step-batch-size-schedule "0:2 4:4 12:8" in the checkpoint, "0:2 8:4 12:8" in this run`) {
		t.Errorf("another schedule: %v", err)
	}
}

// TestStepScheduleScaledUp: a schedule whose first batch is below micro ×
// dp is refused up front on a fresh run, and accepted when the run
// resumes past it (Megatron's scale-up mid-run): the reached batches are
// checked, not the schedule's past ones.
func TestStepScheduleScaledUp(t *testing.T) {
	const s = "0:1 32:2 64:4"
	a := stepArgs(6, s)
	a.WorldSize = 2
	if _, err := Run(context.Background(), a, Options{}); err == nil ||
		!strings.Contains(err.Error(), "--step-batch-size-schedule: the global batch 1 is not a multiple of --micro-batch-size × data-parallel size = 1 × 2 = 2") {
		t.Fatalf("fresh run on DP 2: %v", err)
	}
	dir := t.TempDir()
	first := stepArgs(6, s)
	first.Save, first.ExitInterval = dir, 3 // batches 1, 1, 2: 4 samples
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	a.Load = dir
	res, err := Run(context.Background(), a, Options{})
	if err != nil || res.StartIteration != 3 || len(res.Losses) != 3 {
		t.Fatalf("resume on DP 2: %+v, %v", res, err)
	}
}

// TestStepScheduleRefused: every malformed schedule, or one beside the
// flags it replaces, is one clear error naming the flag.
func TestStepScheduleRefused(t *testing.T) {
	for _, c := range []struct {
		set  func(*Args)
		want string
	}{
		{func(a *Args) { a.StepBatchSizeSchedule = "16:2 64:4" }, `--step-batch-size-schedule "16:2 64:4": the first threshold is 1 samples (of 16 tokens), not 0`},
		{func(a *Args) { a.StepBatchSizeSchedule = "0:2 1Q:4" }, "not a number"},
		{func(a *Args) { a.GlobalBatchSize = 16 }, "--global-batch-size 16 and --step-batch-size-schedule, whose last batch is 8: the schedule sets every iteration's batch; drop --global-batch-size or make it 8"},
		{func(a *Args) { a.WorldSize = 4 }, "the global batch 2 is not a multiple of --micro-batch-size × data-parallel size = 1 × 4 = 4"},
		{func(a *Args) {
			a.GlobalBatchSize, a.RampupBatchSize.Start, a.RampupBatchSize.Increment, a.RampupBatchSize.Samples = 8, 2, 2, 8
		},
			"--rampup-batch-size and --step-batch-size-schedule both set the batch of each iteration: give one"},
	} {
		a := stepArgs(10, testSteps)
		c.set(&a)
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestStepScheduleTrainSamples: --train-samples trains the whole batches of
// the schedule that fit, its warmup and decay in samples.
func TestStepScheduleTrainSamples(t *testing.T) {
	a := stepArgs(0, testSteps)
	a.TrainSamples, a.LRWarmupIters, a.LRWarmupSamples = 30, 0, 4
	a.LogJSON = filepath.Join(t.TempDir(), "log.jsonl")
	res, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 2, 2, 4, 4, 8: 20 samples; the next 8 would end at 28, the one after
	// at 36 > 30.
	recs := readRecords(t, a.LogJSON)
	if len(res.Losses) != 6 || recs[len(recs)-1].ConsumedSamples != 28 {
		t.Fatalf("%d iterations ending at %d samples, want 6 ending at 28", len(res.Losses), recs[len(recs)-1].ConsumedSamples)
	}
	if lr := recs[1].LR; math.Abs(lr-a.LR/2) > 1e-15 {
		t.Errorf("second iteration's learning rate %g, want %g (2 of 4 warmup samples)", lr, a.LR/2)
	}
}

// TestStepScheduleWarmupFraction: with --train-iters the warmup fraction
// is of the decay's samples (the reference's f·lr_decay_steps), as the
// same run in --train-samples gives: 0.15 of 10 iterations of 8 is 12
// samples, so after the first step's 8 the rate is two thirds of --lr.
func TestStepScheduleWarmupFraction(t *testing.T) {
	a := stepArgs(10, "0:8")
	a.LRWarmupIters, a.LRWarmupFraction, a.LRDecayStyle = 0, 0.15, "linear"
	a.LogJSON = filepath.Join(t.TempDir(), "iters.jsonl")
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatal(err)
	}
	b := a
	b.TrainIters, b.TrainSamples = 0, 80
	b.LogJSON = filepath.Join(t.TempDir(), "samples.jsonl")
	if _, err := Run(context.Background(), b, Options{}); err != nil {
		t.Fatal(err)
	}
	ri, rs := readRecords(t, a.LogJSON), readRecords(t, b.LogJSON)
	if lr := ri[1].LR; math.Abs(lr-a.LR*8/12) > 1e-15 || lr != rs[1].LR {
		t.Errorf("second iteration's learning rate %g (--train-samples: %g), want %g", lr, rs[1].LR, a.LR*8/12)
	}
}

// TestStepScheduleUnreachedLast: a last batch the run never reaches is not
// checked against micro × dp, unless the run evaluates (at that batch).
func TestStepScheduleUnreachedLast(t *testing.T) {
	a := stepArgs(4, "0:2 64:4 192:5") // batches 2, 2, 4, 4
	a.WorldSize = 2
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatalf("without evaluation: %v", err)
	}
	a.EvalIters, a.EvalInterval = 1, 4
	if _, err := Run(context.Background(), a, Options{}); err == nil || !strings.Contains(err.Error(), "the global batch 5 is not a multiple") {
		t.Fatalf("with evaluation: %v", err)
	}
}

// TestStepScheduleWarmupFractionResumes: a run resumed with
// --use-checkpoint-opt_param-scheduler takes the warmup fraction from the
// checkpoint, of the decay's samples, and goes on with the uninterrupted
// learning rates.
func TestStepScheduleWarmupFractionResumes(t *testing.T) {
	a := stepArgs(8, testSteps)
	a.LRWarmupIters, a.LRWarmupFraction = 0, 0.3
	a.LogJSON = filepath.Join(t.TempDir(), "full.jsonl")
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatal(err)
	}
	first := a
	first.Save, first.ExitInterval, first.LogJSON = t.TempDir(), 2, ""
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	rest := a
	rest.Load, rest.LRWarmupFraction, rest.LRWarmupIters, rest.UseCheckpointOptParamScheduler = first.Save, 0, 1, true
	rest.LogJSON = filepath.Join(t.TempDir(), "rest.jsonl")
	if _, err := Run(context.Background(), rest, Options{}); err != nil {
		t.Fatal(err)
	}
	full, got := readRecords(t, a.LogJSON), readRecords(t, rest.LogJSON)
	for i, r := range got {
		if w := full[2+i]; r.LR != w.LR {
			t.Errorf("iteration %d: learning rate %g, uninterrupted %g", r.Iteration, r.LR, w.LR)
		}
	}
}
