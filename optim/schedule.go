package optim

import (
	"fmt"
	"math"
)

// Schedule is Megatron's OptimizerParamScheduler: the learning rate and
// the weight decay of each optimizer step, counted in iterations:
//
//	step ≤ warmup:  lr = init_lr + (max_lr − init_lr) · step/warmup
//	constant:       lr = max_lr
//	step > decay:   lr = min_lr
//	otherwise, with r = (step − warmup)/(decay − warmup):
//	  linear               min_lr + (max_lr − min_lr)·(1 − r)
//	  cosine               min_lr + (max_lr − min_lr)·½(cos(πr) + 1)
//	  inverse-square-root  max(min_lr, max_lr·sqrt(max(warmup,1))/sqrt(max(step,1)))
//	  WSD                  max_lr until decay − wsd_decay, then min_lr +
//	                       (max_lr − min_lr)·c(q), q = (step − (decay −
//	                       wsd_decay))/wsd_decay: c = 2·0.5^q − 1
//	                       (exponential), 1 − q (linear), ½(cos(πq) + 1)
//	                       (cosine), 1 − sqrt(q) (minus_sqrt)
//
//	weight decay:   end_wd after wd_incr steps, else start_wd + (end_wd −
//	                start_wd)·c(step/wd_incr): c = that ratio (linear),
//	                ½(cos(π(1 − ratio)) + 1) (cosine); constant: end_wd
//
// step is the number of optimizer steps already taken, so the first
// iteration runs with LR(0), as in Megatron. With Samples (Megatron's
// --train-samples mode) WarmupIters, DecayIters, WSDDecayIters and
// WDIncrIters count samples and the argument is the samples of the steps
// taken: their number times the global batch, or the batches' sum under
// a batch-size ramp.
type Schedule struct {
	MaxLR, MinLR float64
	// InitLR is where the warmup starts (--lr-warmup-init, 0).
	InitLR float64
	// Style is constant, linear, cosine, inverse-square-root or WSD
	// (--lr-decay-style).
	Style       string
	WarmupIters int
	DecayIters  int
	// WSDDecayIters is WSD's annealing at the end of the decay
	// (--lr-wsd-decay-iters), WSDStyle its shape: exponential (Megatron's
	// default), linear, cosine or minus_sqrt (--lr-wsd-decay-style).
	WSDDecayIters int
	WSDStyle      string
	// StartWD and EndWD are the weight decay's ends (--start-weight-decay,
	// --end-weight-decay; both --weight-decay when constant), reached
	// over WDIncrIters (the run's length) in the WDIncrStyle constant,
	// linear or cosine (--weight-decay-incr-style).
	StartWD, EndWD float64
	WDIncrIters    int
	WDIncrStyle    string
	Samples        bool
}

// Hyper are one optimizer step's learning rate and weight decay (the
// values Megatron's scheduler puts in each parameter group).
type Hyper struct {
	LR, WeightDecay float32
}

// Validate checks the schedule's settings, naming the flags.
func (s Schedule) Validate() error {
	unit := "iters"
	if s.Samples {
		unit = "samples"
	}
	switch s.Style {
	case "constant", "linear", "cosine", "inverse-square-root", "WSD":
	default:
		return fmt.Errorf("--lr-decay-style %q is not one of constant, linear, cosine, inverse-square-root, WSD", s.Style)
	}
	if s.InitLR < 0 || math.IsNaN(s.InitLR) || math.IsInf(s.InitLR, 0) {
		return fmt.Errorf("--lr-warmup-init %g: must be a finite number ≥ 0", s.InitLR)
	}
	if s.MaxLR < 0 || s.MinLR < 0 || s.MinLR > s.MaxLR {
		return fmt.Errorf("--lr %g and --min-lr %g: need 0 ≤ min-lr ≤ lr", s.MaxLR, s.MinLR)
	}
	if s.WarmupIters < 0 || s.Style != "constant" && s.Style != "inverse-square-root" && s.DecayIters <= s.WarmupIters && s.DecayIters > 0 {
		return fmt.Errorf("--lr-warmup-%s %d must be ≥ 0 and below --lr-decay-%s %d", unit, s.WarmupIters, unit, s.DecayIters)
	}
	if err := s.validateWSD(unit); err != nil {
		return err
	}
	return s.validateWD()
}

// validateWSD checks WSD's annealing: its length within the decay, and a
// known shape.
func (s Schedule) validateWSD(unit string) error {
	if s.Style != "WSD" {
		return nil
	}
	switch s.WSDStyle {
	case "exponential", "linear", "cosine", "minus_sqrt":
	default:
		return fmt.Errorf("--lr-wsd-decay-style %q is not one of exponential, linear, cosine, minus_sqrt", s.WSDStyle)
	}
	if s.WSDDecayIters <= 0 || s.WSDDecayIters > s.DecayIters-s.WarmupIters {
		return fmt.Errorf("--lr-decay-style WSD anneals over --lr-wsd-decay-%s, which is %d: set it between 1 and the decay after the warmup (%d)", unit, s.WSDDecayIters, s.DecayIters-s.WarmupIters)
	}
	return nil
}

// validateWD checks the weight decay's ends and increment.
func (s Schedule) validateWD() error {
	for _, v := range []float64{s.StartWD, s.EndWD} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("--start-weight-decay %g and --end-weight-decay %g: each must be a finite number ≥ 0", s.StartWD, s.EndWD)
		}
	}
	switch s.WDIncrStyle {
	case "constant":
		if s.StartWD != s.EndWD {
			return fmt.Errorf("--start-weight-decay %g and --end-weight-decay %g with --weight-decay-incr-style constant: a constant weight decay is --weight-decay; choose linear or cosine to move from one to the other", s.StartWD, s.EndWD)
		}
	case "linear", "cosine":
		if s.EndWD < s.StartWD {
			return fmt.Errorf("--start-weight-decay %g above --end-weight-decay %g: the weight decay increases (Megatron asserts end ≥ start)", s.StartWD, s.EndWD)
		}
		if s.WDIncrIters <= 0 {
			return fmt.Errorf("--weight-decay-incr-style %s increases the weight decay over the run's length, which is %d", s.WDIncrStyle, s.WDIncrIters)
		}
	default:
		return fmt.Errorf("--weight-decay-incr-style %q is not one of constant, linear, cosine", s.WDIncrStyle)
	}
	return nil
}

// WD returns the weight decay after step optimizer steps (Megatron's
// get_wd).
func (s Schedule) WD(step int) float64 {
	if step > s.WDIncrIters || s.WDIncrStyle == "constant" || s.WDIncrStyle == "" {
		return s.EndWD
	}
	r := float64(step) / float64(s.WDIncrIters)
	coeff := r
	if s.WDIncrStyle == "cosine" {
		coeff = 0.5 * (math.Cos(math.Pi*(1-r)) + 1)
	}
	return s.StartWD + coeff*(s.EndWD-s.StartWD)
}

// LR returns the learning rate after step optimizer steps (with Samples,
// after optimizer steps that consumed step samples).
func (s Schedule) LR(step int) float64 {
	if s.WarmupIters > 0 && step <= s.WarmupIters {
		return s.InitLR + (s.MaxLR-s.InitLR)*float64(step)/float64(s.WarmupIters)
	}
	if s.Style == "constant" {
		return s.MaxLR
	}
	if step > s.DecayIters { // (inverse-square-root too, as Megatron's get_lr)
		return s.MinLR
	}
	if s.Style == "inverse-square-root" {
		w := math.Max(float64(s.WarmupIters), 1)
		return math.Max(s.MinLR, s.MaxLR*math.Sqrt(w)/math.Sqrt(math.Max(float64(step), 1)))
	}
	r := float64(step-s.WarmupIters) / float64(s.DecayIters-s.WarmupIters)
	var coeff float64
	switch s.Style {
	case "linear":
		coeff = 1 - r
	case "cosine":
		coeff = 0.5 * (math.Cos(math.Pi*r) + 1)
	case "WSD":
		coeff = s.wsdCoeff(step)
	}
	return s.MinLR + coeff*(s.MaxLR-s.MinLR)
}

// wsdCoeff is WSD's share of max_lr − min_lr at step: 1 until the
// annealing, then its shape.
func (s Schedule) wsdCoeff(step int) float64 {
	start := s.DecayIters - s.WSDDecayIters
	if step <= start {
		return 1
	}
	q := float64(step-start) / float64(s.WSDDecayIters)
	switch s.WSDStyle {
	case "linear":
		return 1 - q
	case "cosine":
		return 0.5 * (math.Cos(math.Pi*q) + 1)
	case "minus_sqrt":
		return 1 - math.Sqrt(q)
	}
	return 2*math.Pow(0.5, q) - 1 // exponential
}
