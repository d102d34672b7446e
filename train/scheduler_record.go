package train

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gotron/gotron/ckpt"
)

// schedulerRecord is what a checkpoint records of the run's learning-rate
// and weight-decay schedule (ckpt.Args.Scheduler), the values
// Megatron's OptimizerParamScheduler keeps in its state: the peak and
// least learning rate, the decay style, the warmup and decay lengths as
// its flags count them (iterations, or samples with --train-samples; under
// --step-batch-size-schedule iterations of its final batch), and the
// weight decay.
func schedulerRecord(a Args) map[string]string {
	s := a.flagSchedule()
	unit := "iterations"
	if s.Samples {
		unit = "samples"
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	r := map[string]string{
		"max_lr": f(s.MaxLR), "min_lr": f(s.MinLR), "lr_decay_style": s.Style,
		"lr_warmup_steps": strconv.Itoa(s.WarmupIters), "lr_decay_steps": strconv.Itoa(s.DecayIters),
		"lr_steps_unit": unit,
	}
	if a.LRWarmupFraction > 0 {
		// Under --step-batch-size-schedule the fraction is of the decay's
		// samples, which lr_warmup_steps (its iterations) cannot say.
		r["lr_warmup_fraction"] = f(a.LRWarmupFraction)
	}
	if s.WDIncrStyle == "constant" {
		r["weight_decay"] = f(a.WeightDecay)
	} else {
		r["start_wd"], r["end_wd"], r["wd_incr_style"] = f(s.StartWD), f(s.EndWD), s.WDIncrStyle
		r["wd_incr_steps"] = strconv.Itoa(s.WDIncrIters)
	}
	if s.Style == "WSD" {
		r["lr_wsd_decay_steps"], r["lr_wsd_decay_style"] = strconv.Itoa(s.WSDDecayIters), s.WSDStyle
	}
	if a.Optimizer == "sgd" { // (absent: adam, as every earlier checkpoint)
		r["optimizer"], r["sgd_momentum"] = a.Optimizer, f(a.SGDMomentum)
	}
	return r
}

// schedulerFlags are the flags that set each recorded schedule value.
var schedulerFlags = map[string]string{
	"max_lr": "--lr", "min_lr": "--min-lr", "lr_decay_style": "--lr-decay-style",
	"lr_warmup_steps": "--lr-warmup-iters/--lr-warmup-samples/--lr-warmup-fraction", "lr_warmup_fraction": "--lr-warmup-fraction",
	"lr_decay_steps": "--lr-decay-iters/--lr-decay-samples", "lr_steps_unit": "--train-iters/--train-samples",
	"weight_decay": "--weight-decay", "start_wd": "--start-weight-decay", "end_wd": "--end-weight-decay",
	"wd_incr_style": "--weight-decay-incr-style", "wd_incr_steps": "--train-iters/--train-samples",
	"lr_wsd_decay_steps": "--lr-wsd-decay-iters/--lr-wsd-decay-samples", "lr_wsd_decay_style": "--lr-wsd-decay-style",
	"optimizer": "--optimizer", "sgd_momentum": "--sgd-momentum",
}

// resumeScheduler applies the checkpoint's schedule record (rec; nil for
// a checkpoint that predates it) on resume, as Megatron's
// OptimizerParamScheduler does when it loads its state: a schedule that
// differs from this run's is refused, unless
// --override-opt_param-scheduler keeps this run's or
// --use-checkpoint-opt_param-scheduler takes the checkpoint's. A resume
// that does not load the optimizer (--finetune, --no-load-optim) starts
// the schedule afresh and checks nothing.
func resumeScheduler(a Args, rec map[string]string) (Args, error) {
	if a.Finetune || a.NoLoadOptim {
		return a, nil
	}
	if err := sameOptimizer(a, rec); err != nil {
		return a, err
	}
	if a.OverrideOptParamScheduler {
		return a, nil
	}
	if rec == nil {
		if a.UseCheckpointOptParamScheduler {
			return a, fmt.Errorf("--use-checkpoint-opt_param-scheduler: the checkpoint records no learning-rate schedule (an older gotron saved it): pass its values (--lr, --min-lr, the warmup and decay, --weight-decay) instead")
		}
		return a, nil
	}
	now := schedulerRecord(a)
	if u := rec["lr_steps_unit"]; u != now["lr_steps_unit"] {
		flags := "--train-samples and --lr-warmup-samples/--lr-decay-samples"
		if u == "iterations" {
			flags = "--train-iters and --lr-warmup-iters/--lr-decay-iters"
		}
		return a, fmt.Errorf("the checkpoint's learning-rate schedule counts %s and this run's %s: resume with %s, or pass --override-opt_param-scheduler to switch to this run's schedule", u, now["lr_steps_unit"], flags)
	}
	if a.UseCheckpointOptParamScheduler {
		return applySchedulerRecord(a, rec)
	}
	var diffs []string
	for k, v := range rec {
		if w, ok := now[k]; ok && w != v {
			diffs = append(diffs, fmt.Sprintf("%s %s in the checkpoint, %s in this run (%s)", k, v, w, schedulerFlags[k]))
		}
	}
	for _, k := range []string{"wd_incr_style", "lr_wsd_decay_steps"} { // recorded where used
		if _, ok := rec[k]; ok != (now[k] != "") {
			diffs = append(diffs, fmt.Sprintf("%s %s in the checkpoint, %s in this run (%s)", k, orNone(rec[k]), orNone(now[k]), schedulerFlags[k]))
		}
	}
	if len(diffs) == 0 {
		return a, nil
	}
	sort.Strings(diffs)
	return a, fmt.Errorf("the learning-rate schedule differs from the checkpoint's: %s: pass the checkpoint's values, or --override-opt_param-scheduler to train on with this run's, or --use-checkpoint-opt_param-scheduler to take the checkpoint's",
		strings.Join(diffs, "; "))
}

// sameOptimizer refuses to load the state of another optimizer (Adam's
// moments into SGD, or SGD's momentum with another momentum): the
// record's optimizer, adam when it names none. Without a record (a
// checkpoint saved without its optimizer state, or by an older gotron)
// the keys' check on loading speaks.
func sameOptimizer(a Args, rec map[string]string) error {
	if rec == nil {
		return nil
	}
	was, mom := "adam", ""
	if rec["optimizer"] != "" {
		was, mom = rec["optimizer"], rec["sgd_momentum"]
	}
	now := schedulerRecord(a)
	is := "adam"
	if now["optimizer"] != "" {
		is = now["optimizer"]
	}
	if was != is || mom != now["sgd_momentum"] {
		return fmt.Errorf("the checkpoint's optimizer is %s, this run's %s: its state does not carry over; pass the checkpoint's --optimizer (and --sgd-momentum), or --no-load-optim to start the optimizer afresh", describeOptimizer(was, mom), describeOptimizer(is, now["sgd_momentum"]))
	}
	return nil
}

// describeOptimizer is "adam", or "sgd with momentum μ".
func describeOptimizer(name, momentum string) string {
	if name == "sgd" {
		return "sgd with momentum " + momentum
	}
	return name
}

// orNone is v, or "none" for a value not recorded.
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// applySchedulerRecord sets a's schedule to the record's
// (--use-checkpoint-opt_param-scheduler).
func applySchedulerRecord(a Args, rec map[string]string) (Args, error) {
	bad := func(k string) error {
		return fmt.Errorf("--use-checkpoint-opt_param-scheduler: the checkpoint's %s record %q is damaged", ckpt.SchedulerArgsKey, k)
	}
	num := func(k string, dst *float64) error {
		v, err := strconv.ParseFloat(rec[k], 64)
		if err != nil {
			return bad(k)
		}
		*dst = v
		return nil
	}
	count := func(k string) (int, error) {
		n, err := strconv.Atoi(rec[k])
		if err != nil || n < 0 {
			return 0, bad(k)
		}
		return n, nil
	}
	for k, dst := range map[string]*float64{"max_lr": &a.LR, "min_lr": &a.MinLR, "weight_decay": &a.WeightDecay} {
		if _, ok := rec[k]; !ok && k == "weight_decay" {
			continue // an increasing weight decay's record: its ends instead
		}
		if err := num(k, dst); err != nil {
			return a, err
		}
	}
	warm, err := count("lr_warmup_steps")
	if err != nil {
		return a, err
	}
	decay, err := count("lr_decay_steps")
	if err != nil {
		return a, err
	}
	a.LRDecayStyle, a.LRWarmupFraction = rec["lr_decay_style"], 0
	if _, ok := rec["lr_warmup_fraction"]; ok {
		if err := num("lr_warmup_fraction", &a.LRWarmupFraction); err != nil {
			return a, err
		}
	}
	if a, err = applyWeightDecayRecord(a, rec, num, count); err != nil {
		return a, err
	}
	wsd := 0
	if a.LRDecayStyle == "WSD" {
		if wsd, err = count("lr_wsd_decay_steps"); err != nil {
			return a, err
		}
		a.LRWSDDecayStyle = rec["lr_wsd_decay_style"]
	}
	switch rec["lr_steps_unit"] {
	case "iterations":
		if a.TrainSamples > 0 {
			return a, fmt.Errorf("--use-checkpoint-opt_param-scheduler: the checkpoint's schedule counts iterations, and this run --train-samples: use --train-iters")
		}
		a.LRWarmupIters, a.LRDecayIters, a.LRWSDDecayIters = warm, decay, wsd
	case "samples":
		if a.TrainSamples == 0 {
			return a, fmt.Errorf("--use-checkpoint-opt_param-scheduler: the checkpoint's schedule counts samples, and this run iterations: use --train-samples")
		}
		a.LRWarmupSamples, a.LRDecaySamples, a.LRWSDDecaySamples = warm, decay, wsd
	default:
		return a, bad("lr_steps_unit")
	}
	if a.LRWarmupFraction > 0 {
		a.LRWarmupIters, a.LRWarmupSamples = 0, 0 // the fraction gives the warmup
	}
	return a, nil
}

// applyWeightDecayRecord sets a's weight-decay increment to the record's,
// its length included: constant when it records none.
func applyWeightDecayRecord(a Args, rec map[string]string, num func(string, *float64) error, count func(string) (int, error)) (Args, error) {
	a.WeightDecayIncrStyle, a.StartWeightDecay, a.EndWeightDecay, a.WeightDecayIncrIters = "constant", nil, nil, 0
	style, ok := rec["wd_incr_style"]
	if !ok {
		return a, nil
	}
	var start, end float64
	if err := num("start_wd", &start); err != nil {
		return a, err
	}
	if err := num("end_wd", &end); err != nil {
		return a, err
	}
	steps, err := count("wd_incr_steps")
	if err != nil {
		return a, err
	}
	a.WeightDecayIncrStyle, a.StartWeightDecay, a.EndWeightDecay, a.WeightDecayIncrIters = style, &start, &end, steps
	return a, nil
}
