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

// TestWeightDecayAndWSDSchedules: the weight decay's increment reaches
// the optimizer step by step — from w to w is the constant w's run bit
// for bit, from 0 to 0.5 another run — and WSD whose linear annealing
// spans the whole decay is the linear schedule bit for bit, while its
// exponential one is another; a checkpoint records both, a resume with a
// constant weight decay or another decay style is refused naming them,
// and --use-checkpoint-opt_param-scheduler takes them (the uninterrupted
// run's losses).
func TestWeightDecayAndWSDSchedules(t *testing.T) {
	run := func(a Args) *Result {
		t.Helper()
		res, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	wd := func(style string, start, end float64) Args {
		a := mockArgs(6)
		a.WeightDecay, a.WeightDecayIncrStyle, a.StartWeightDecay, a.EndWeightDecay = 0.05, style, &start, &end
		if style == "constant" {
			a.StartWeightDecay, a.EndWeightDecay = nil, nil
		}
		return a
	}
	constant := run(wd("constant", 0, 0))
	sameEnds := run(wd("linear", 0.05, 0.05))
	rising := run(wd("cosine", 0, 0.5))
	for i := range constant.Losses {
		if sameEnds.Losses[i] != constant.Losses[i] {
			t.Errorf("step %d: linear from 0.05 to 0.05 gives %v, constant 0.05 %v", i+1, sameEnds.Losses[i], constant.Losses[i])
		}
	}
	if last := len(rising.Losses) - 1; rising.Losses[last] == constant.Losses[last] {
		t.Error("a weight decay rising from 0 to 0.5 trains as the constant 0.05: the schedule does not reach the optimizer")
	}

	wsd := func(style string) Args {
		a := mockArgs(6)
		a.LRDecayStyle, a.LRWSDDecayStyle, a.LRWSDDecayIters = "WSD", style, 4 // decay 6 − warmup 2
		return a
	}
	linear := mockArgs(6)
	linear.LRDecayStyle = "linear"
	want, got, expo := run(linear), run(wsd("linear")), run(wsd("exponential"))
	for i := range want.Losses {
		if got.Losses[i] != want.Losses[i] {
			t.Errorf("step %d: WSD linear over the whole decay: loss %v, linear %v", i+1, got.Losses[i], want.Losses[i])
		}
	}
	if last := len(want.Losses) - 1; expo.Losses[last] == want.Losses[last] {
		t.Error("WSD's exponential annealing trains as the linear decay")
	}

	saved := wd("linear", 0, 0.5)
	saved.LRDecayStyle, saved.LRWSDDecayIters, saved.LRWSDDecayStyle = "WSD", 3, "cosine"
	whole := run(saved)
	first := saved // the same schedule, stopped after iteration 3
	first.ExitInterval, first.Save = 3, t.TempDir()
	run(first)
	changed := mockArgs(6)
	changed.Load, changed.LRDecayIters = first.Save, 6
	_, err := Run(context.Background(), changed, Options{})
	for _, w := range []string{"wd_incr_style linear in the checkpoint, none in this run (--weight-decay-incr-style)",
		"lr_decay_style WSD in the checkpoint, cosine in this run", "lr_wsd_decay_steps 3 in the checkpoint, none in this run"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("a resume with a constant weight decay and cosine decay: %v, want %q", err, w)
		}
	}
	changed.UseCheckpointOptParamScheduler = true
	res := run(changed)
	for i, l := range res.Losses {
		if w := whole.Losses[3+i]; math.Abs(l-w) > 1e-6*math.Abs(w) {
			t.Errorf("--use-checkpoint-opt_param-scheduler: loss %d %v, the uninterrupted run's %v", 4+i, l, w)
		}
	}
}

// TestSGD: --optimizer sgd is in effect (another curve than Adam's), DP 2 with the
// distributed optimizer (each rank its shard of the momentum buffer)
// follows one rank to 1e-6, a checkpoint holds the momentum buffer and a
// resume gives the uninterrupted run's losses, and a resume with Adam, or
// another momentum, is refused naming the optimizers.
func TestSGD(t *testing.T) {
	sgd := func(world int) Args {
		a := mockArgs(8)
		a.WorldSize, a.Optimizer, a.SGDMomentum, a.LR, a.MinLR, a.WeightDecay = world, "sgd", 0.9, 0.3, 0.03, 0.01
		return a
	}
	one := sgd(1)
	want, err := Run(context.Background(), one, Options{})
	if err != nil {
		t.Fatal(err)
	}
	adam := one
	adam.Optimizer = "adam"
	if other, err := Run(context.Background(), adam, Options{}); err != nil || other.Losses[2] == want.Losses[2] {
		t.Errorf("SGD trains as Adam (%v): the optimizer is not in effect", err)
	}
	two := sgd(2)
	two.DDP.UseDistributedOptimizer = true
	got, err := Run(context.Background(), two, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Losses {
		if e := relErr(got.Losses[i], want.Losses[i]); e > 1e-6 {
			t.Errorf("DP 2, distributed optimizer, step %d: loss %v, one rank %v", i+1, got.Losses[i], want.Losses[i])
		}
	}
	saved := one
	saved.ExitInterval, saved.Save = 4, t.TempDir()
	if _, err := Run(context.Background(), saved, Options{}); err != nil {
		t.Fatal(err)
	}
	resumed := one
	resumed.Load = saved.Save
	res, err := Run(context.Background(), resumed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range res.Losses {
		if w := want.Losses[4+i]; l != w {
			t.Errorf("resumed step %d: loss %v, uninterrupted %v", 5+i, l, w)
		}
	}
	for _, c := range []struct {
		edit func(a *Args)
		want string
	}{
		{func(a *Args) { a.Optimizer = "adam" }, "the checkpoint's optimizer is sgd with momentum 0.9, this run's adam"},
		{func(a *Args) { a.SGDMomentum = 0.5 }, "sgd with momentum 0.9, this run's sgd with momentum 0.5"},
	} {
		a := resumed
		c.edit(&a)
		if _, err := Run(context.Background(), a, Options{}); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--no-load-optim") {
			t.Errorf("%v, want an error naming %q and --no-load-optim", err, c.want)
		}
	}
}

// TestWeightDecayIncrementResume: --use-checkpoint-opt_param-scheduler
// takes the weight decay's increment with its length (the checkpoint's
// run of 6 iterations, not this run's 8), so the resumed iterations are
// the uninterrupted run's; and under an increasing weight decay
// --weight-decay is not part of the schedule, so another value resumes.
func TestWeightDecayIncrementResume(t *testing.T) {
	start, end := 0.0, 0.5
	a := mockArgs(6)
	a.WeightDecayIncrStyle, a.StartWeightDecay, a.EndWeightDecay, a.LRDecayIters = "linear", &start, &end, 6
	whole, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := a
	first.ExitInterval, first.Save = 3, t.TempDir()
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	longer := mockArgs(8)
	longer.Load, longer.UseCheckpointOptParamScheduler = first.Save, true
	res, err := Run(context.Background(), longer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if l, w := res.Losses[i], whole.Losses[3+i]; math.Abs(l-w) > 1e-6*math.Abs(w) {
			t.Errorf("step %d: loss %v, the uninterrupted run's %v (the increment's length not taken)", 4+i, l, w)
		}
	}
	other := a
	other.Load, other.WeightDecay = first.Save, 0.3
	if _, err := Run(context.Background(), other, Options{}); err != nil {
		t.Errorf("another --weight-decay under an increasing weight decay: %v", err)
	}
}
