package optim

import (
	"fmt"
	"math"
)

// Schedule is Megatron's OptimizerParamScheduler for the learning rate,
// counted in iterations:
//
//	step ≤ warmup:  lr = max_lr · step/warmup
//	step > decay:   lr = min_lr
//	otherwise, with r = (step − warmup)/(decay − warmup):
//	  constant             max_lr
//	  linear               min_lr + (max_lr − min_lr)·(1 − r)
//	  cosine               min_lr + (max_lr − min_lr)·½(cos(πr) + 1)
//	  inverse-square-root  max(min_lr, max_lr·sqrt(max(warmup,1))/sqrt(max(step,1)))
//
// step is the number of optimizer steps already taken, so the first
// iteration runs with LR(0), as in Megatron. With Samples (Megatron's
// --train-samples mode) WarmupIters and DecayIters count samples and
// LR's argument is the samples of the steps taken: their number times the
// global batch, or the batches' sum under a batch-size ramp.
type Schedule struct {
	MaxLR, MinLR float64
	// InitLR is where the warmup starts (--lr-warmup-init, 0).
	InitLR      float64
	Style       string // constant, linear, cosine, inverse-square-root
	WarmupIters int
	DecayIters  int
	Samples     bool
}

// Validate checks the schedule's settings, naming the flags.
func (s Schedule) Validate() error {
	switch s.Style {
	case "constant", "linear", "cosine", "inverse-square-root":
	default:
		return fmt.Errorf("--lr-decay-style %q is not one of constant, linear, cosine, inverse-square-root", s.Style)
	}
	if s.InitLR < 0 || math.IsNaN(s.InitLR) || math.IsInf(s.InitLR, 0) {
		return fmt.Errorf("--lr-warmup-init %g: must be a finite number ≥ 0", s.InitLR)
	}
	if s.MaxLR < 0 || s.MinLR < 0 || s.MinLR > s.MaxLR {
		return fmt.Errorf("--lr %g and --min-lr %g: need 0 ≤ min-lr ≤ lr", s.MaxLR, s.MinLR)
	}
	if s.WarmupIters < 0 || s.Style != "constant" && s.Style != "inverse-square-root" && s.DecayIters <= s.WarmupIters && s.DecayIters > 0 {
		unit := "iters"
		if s.Samples {
			unit = "samples"
		}
		return fmt.Errorf("--lr-warmup-%s %d must be ≥ 0 and below --lr-decay-%s %d", unit, s.WarmupIters, unit, s.DecayIters)
	}
	return nil
}

// LR returns the learning rate after step optimizer steps (with Samples,
// after optimizer steps that consumed step samples).
func (s Schedule) LR(step int) float64 {
	if s.WarmupIters > 0 && step <= s.WarmupIters {
		return s.InitLR + (s.MaxLR-s.InitLR)*float64(step)/float64(s.WarmupIters)
	}
	switch s.Style {
	case "constant":
		return s.MaxLR
	case "inverse-square-root":
		w := math.Max(float64(s.WarmupIters), 1)
		return math.Max(s.MinLR, s.MaxLR*math.Sqrt(w)/math.Sqrt(math.Max(float64(step), 1)))
	}
	if step > s.DecayIters {
		return s.MinLR
	}
	r := float64(step-s.WarmupIters) / float64(s.DecayIters-s.WarmupIters)
	coeff := 1 - r
	if s.Style == "cosine" {
		coeff = 0.5 * (math.Cos(math.Pi*r) + 1)
	}
	return s.MinLR + coeff*(s.MaxLR-s.MinLR)
}
