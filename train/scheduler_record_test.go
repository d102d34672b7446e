package train

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestResumeChecksTheSchedule: a checkpoint records the learning-rate
// schedule, and a resume whose schedule differs is refused naming each
// value and the two ways on, as Megatron's OptimizerParamScheduler
// refuses it; --override-opt_param-scheduler trains on with this run's,
// --use-checkpoint-opt_param-scheduler with the checkpoint's (the
// uninterrupted run's learning rates); --no-load-optim checks nothing;
// both flags at once, or either without --load, are refused.
func TestResumeChecksTheSchedule(t *testing.T) {
	run := func(a Args) (*Result, error) { return Run(context.Background(), a, Options{}) }
	base := mockArgs(6)
	base.LRDecayIters = 6
	whole, err := run(base)
	if err != nil {
		t.Fatal(err)
	}
	saved := base
	saved.TrainIters, saved.Save = 3, t.TempDir()
	if _, err := run(saved); err != nil {
		t.Fatal(err)
	}
	resume := base
	resume.Load = saved.Save
	if res, err := run(resume); err != nil || res.StartIteration != 3 {
		t.Fatalf("the same schedule: %v, %v", res, err)
	}
	changed := resume
	changed.LR, changed.LRDecayIters = 1e-3, 12
	_, err = run(changed)
	for _, w := range []string{"max_lr 0.003 in the checkpoint, 0.001 in this run (--lr)", "lr_decay_steps 6 in the checkpoint, 12 in this run",
		"--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("a changed schedule: %v, want %q", err, w)
		}
	}
	over := changed
	over.OverrideOptParamScheduler = true
	if _, err := run(over); err != nil {
		t.Errorf("--override-opt_param-scheduler: %v", err)
	}
	use := changed
	use.UseCheckpointOptParamScheduler = true
	res, err := run(use)
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint's schedule: the uninterrupted run's losses from
	// iteration 4 on (the same weights, moments and learning rates).
	for i, l := range res.Losses {
		if w := whole.Losses[3+i]; math.Abs(l-w) > 1e-6*math.Abs(w) {
			t.Errorf("--use-checkpoint-opt_param-scheduler: loss %d %v, the uninterrupted run's %v", 4+i, l, w)
		}
	}
	noOpt := changed
	noOpt.NoLoadOptim = true
	if _, err := run(noOpt); err != nil {
		t.Errorf("--no-load-optim: %v", err)
	}
	both := over
	both.UseCheckpointOptParamScheduler = true
	if err := both.Validate(1); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("both flags: %v", err)
	}
	noLoad := mockArgs(3)
	noLoad.OverrideOptParamScheduler = true
	if err := noLoad.Validate(1); err == nil || !strings.Contains(err.Error(), "--override-opt_param-scheduler says how to load") {
		t.Errorf("without --load: %v", err)
	}
}

// TestResumeScheduleEdges: a schedule counted in samples against one in
// iterations says so alone and how to go on (never the flag that cannot
// help); --use-checkpoint-opt_param-scheduler with a checkpoint that
// records no schedule is refused, not ignored.
func TestResumeScheduleEdges(t *testing.T) {
	a := mockArgs(6)
	a.LRDecayIters = 6
	rec := schedulerRecord(a)
	samples := mockArgs(0)
	samples.TrainIters, samples.TrainSamples, samples.LRWarmupIters = 0, 48, 0
	_, err := resumeScheduler(samples, rec)
	if err == nil || !strings.Contains(err.Error(), "counts iterations and this run's samples: resume with --train-iters") ||
		strings.Contains(err.Error(), "--use-checkpoint-opt_param-scheduler") {
		t.Errorf("samples against iterations: %v", err)
	}
	use := a
	use.UseCheckpointOptParamScheduler = true
	if _, err := resumeScheduler(use, nil); err == nil || !strings.Contains(err.Error(), "records no learning-rate schedule") {
		t.Errorf("no record: %v", err)
	}
	if _, err := resumeScheduler(a, nil); err != nil {
		t.Errorf("no record, no flag: %v", err)
	}
}
