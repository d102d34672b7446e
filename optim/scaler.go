package optim

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/gotron/gotron/tensor/kernels"
)

// GradScaler is a loss scaler for fp16 mixed-precision training (the
// MegatronGradScaler family). Gradients of a float16 model underflow when
// the loss is small, so the loss is multiplied by a scale S before the
// backward pass and every gradient is divided by S before the optimizer
// step. One iteration runs:
//
//	inv := s.InvScale()                     // read before Update
//	backward of S·loss                      // gradients are S·g
//	found := UnscaleAndCheck(grads, inv)    // g ← inv·g; any NaN/±Inf?
//	found = MAX of found over the ranks that hold gradients (see UnscaleAndCheck)
//	s.Update(found)
//	if found { skip clipping and the optimizer step }
//	else     { clip, step }
//
// A skipped step leaves the parameters, the optimizer's moments and its
// step count untouched; the next iteration runs with the new scale.
//
// Scale has the signature of config.LossScaleFunc, so s.Scale can be
// handed to the schedules that multiply the loss.
type GradScaler interface {
	// Scale returns the loss scale S.
	Scale() float32
	// InvScale returns 1/S, computed in float64 and rounded once to float32.
	InvScale() float32
	// Update adjusts the scale after an iteration; foundInf reports whether
	// any rank saw a NaN or ±Inf gradient in it.
	Update(foundInf bool)
	// State returns what a checkpoint must store to resume the scaler.
	State() ScalerState
	// Load restores a State, or returns an error (and leaves the scaler as
	// it was) when the state is corrupt or impossible for this scaler.
	Load(ScalerState) error
}

// ScalerState is a loss scaler's checkpointed state; its JSON keys are the
// names of Megatron's grad-scaler state dict.
type ScalerState struct {
	Scale             float32 `json:"scale"`
	GrowthTracker     int     `json:"growth_tracker"`
	HysteresisTracker int     `json:"hysteresis_tracker"`
}

// Validate reports what makes st unusable by any scaler: a scale that is
// NaN, ±Inf or ≤ 0, or a negative growth tracker. The hysteresis tracker
// may be negative: each non-finite iteration past the hysteresis lowers it
// further.
func (st ScalerState) Validate() error {
	var errs []error
	if !(st.Scale > 0) || math.IsInf(float64(st.Scale), 1) {
		errs = append(errs, fmt.Errorf("optim: grad scaler state: scale %g is not a finite number > 0", st.Scale))
	}
	if st.GrowthTracker < 0 {
		errs = append(errs, fmt.Errorf("optim: grad scaler state: growth_tracker %d is negative", st.GrowthTracker))
	}
	return errors.Join(errs...)
}

// inverseOf returns 1/s computed in float64 and rounded once to float32.
func inverseOf(s float32) float32 { return float32(1 / float64(s)) }

// ConstantGradScaler is a fixed loss scale S (Megatron's --loss-scale S):
// Update changes nothing, and the scale given on the command line wins
// over any checkpoint.
type ConstantGradScaler struct {
	scale float32
}

var _ GradScaler = (*ConstantGradScaler)(nil)

// NewConstantGradScaler returns a scaler fixed at scale, which must be a
// finite number > 0.
func NewConstantGradScaler(scale float32) (*ConstantGradScaler, error) {
	if !(scale > 0) || math.IsInf(float64(scale), 1) {
		return nil, fmt.Errorf("--loss-scale %g must be a finite number > 0", scale)
	}
	return &ConstantGradScaler{scale: scale}, nil
}

// Scale returns S.
func (c *ConstantGradScaler) Scale() float32 { return c.scale }

// InvScale returns 1/S (float64 division rounded to float32).
func (c *ConstantGradScaler) InvScale() float32 { return inverseOf(c.scale) }

// Update does nothing: the scale is constant.
func (c *ConstantGradScaler) Update(foundInf bool) {}

// State returns {Scale: S} with zero trackers.
func (c *ConstantGradScaler) State() ScalerState { return ScalerState{Scale: c.scale} }

// Load validates st (ScalerState.Validate) and keeps S: a constant scaler
// has nothing to resume, and --loss-scale decides its scale.
func (c *ConstantGradScaler) Load(st ScalerState) error { return st.Validate() }

// DynamicScalerConfig holds a dynamic loss scaler's settings. Megatron sets
// GrowthFactor = 2 and BackoffFactor = 0.5 and takes the rest from flags.
type DynamicScalerConfig struct {
	InitialScale   float32 // --initial-loss-scale: starting scale, finite and > 0 (default 2³²)
	MinScale       float32 // --min-loss-scale: floor of the backoff, in (0, InitialScale] (default 1)
	GrowthFactor   float32 // scale multiplier after GrowthInterval clean iterations, finite and > 1 (2)
	BackoffFactor  float32 // scale multiplier once the hysteresis is used up, in (0, 1) (0.5)
	GrowthInterval int     // --loss-scale-window: clean iterations per growth, ≥ 1 (default 1000)
	Hysteresis     int     // --hysteresis: the count of non-finite iterations since the last growth that first backs off, ≥ 1 (default 2)
}

// DefaultDynamicScalerConfig returns Megatron's defaults: initial scale 2³²,
// minimum 1, growth 2, backoff 0.5, window 1000, hysteresis 2.
func DefaultDynamicScalerConfig() DynamicScalerConfig {
	return DynamicScalerConfig{
		InitialScale:   1 << 32,
		MinScale:       1,
		GrowthFactor:   2,
		BackoffFactor:  0.5,
		GrowthInterval: 1000,
		Hysteresis:     2,
	}
}

// Validate checks the settings, naming the flags; it reports every
// violation, not only the first.
func (c DynamicScalerConfig) Validate() error {
	var errs []error
	if !(c.InitialScale > 0) || math.IsInf(float64(c.InitialScale), 1) {
		errs = append(errs, fmt.Errorf("--initial-loss-scale %g must be a finite number > 0", c.InitialScale))
	}
	if !(c.MinScale > 0) || c.MinScale > c.InitialScale {
		errs = append(errs, fmt.Errorf("--min-loss-scale %g must be > 0 and ≤ --initial-loss-scale %g", c.MinScale, c.InitialScale))
	}
	if !(c.GrowthFactor > 1) || math.IsInf(float64(c.GrowthFactor), 1) {
		errs = append(errs, fmt.Errorf("loss-scale growth factor %g must be finite and > 1 (Megatron uses 2)", c.GrowthFactor))
	}
	if !(c.BackoffFactor > 0 && c.BackoffFactor < 1) {
		errs = append(errs, fmt.Errorf("loss-scale backoff factor %g must lie in (0, 1) (Megatron uses 0.5)", c.BackoffFactor))
	}
	if c.GrowthInterval < 1 {
		errs = append(errs, fmt.Errorf("--loss-scale-window %d must be ≥ 1", c.GrowthInterval))
	}
	if c.Hysteresis < 1 {
		errs = append(errs, fmt.Errorf("--hysteresis %d must be ≥ 1", c.Hysteresis))
	}
	return errors.Join(errs...)
}

// DynamicGradScaler is Megatron's dynamic loss scaler, following
// megatron/core/optimizer/grad_scaler.py of Megatron-LM commit d98e8a6
// (DynamicGradScaler.update). With scale S, growth tracker g and hysteresis
// tracker h, starting at S = InitialScale, g = 0, h = Hysteresis, Update
// does, in float32:
//
//	non-finite iteration:  g ← 0;  h ← h − 1;  if h ≤ 0: S ← max(S·BackoffFactor, MinScale)
//	clean iteration:       g ← g + 1;  if g = GrowthInterval: g ← 0, h ← Hysteresis, S ← S·GrowthFactor
//
// In that version h is restored only when the scale grows, not on every
// clean iteration: the Hysteresis-th non-finite iteration since the last
// growth (or the start) backs off, whether or not they were consecutive. Once h ≤ 0, every further non-finite
// iteration backs off again, and h keeps falling below zero.
//
// gotron departs from the reference at two unreachable-in-practice edges,
// so that every state Update produces is one Load accepts: a growth whose
// float32 product would be +Inf leaves S unchanged (the trackers are still
// reset; the reference would store +Inf, which no backoff can lower), and h
// stops falling at math.MinInt instead of wrapping around.
//
// The embedded settings are read by Update; change them only through
// NewDynamicGradScaler.
type DynamicGradScaler struct {
	DynamicScalerConfig
	scale             float32
	growthTracker     int
	hysteresisTracker int
}

var _ GradScaler = (*DynamicGradScaler)(nil)

// NewDynamicGradScaler validates cfg and returns a scaler at
// S = cfg.InitialScale, g = 0, h = cfg.Hysteresis.
func NewDynamicGradScaler(cfg DynamicScalerConfig) (*DynamicGradScaler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DynamicGradScaler{
		DynamicScalerConfig: cfg,
		scale:               cfg.InitialScale,
		hysteresisTracker:   cfg.Hysteresis,
	}, nil
}

// Scale returns S.
func (d *DynamicGradScaler) Scale() float32 { return d.scale }

// InvScale returns 1/S (float64 division rounded to float32).
func (d *DynamicGradScaler) InvScale() float32 { return inverseOf(d.scale) }

// Update applies the rule in the type's comment for one iteration.
func (d *DynamicGradScaler) Update(foundInf bool) {
	if foundInf {
		d.growthTracker = 0
		if d.hysteresisTracker > math.MinInt {
			d.hysteresisTracker--
		}
		if d.hysteresisTracker <= 0 {
			d.scale = max(d.scale*d.BackoffFactor, d.MinScale)
		}
		return
	}
	d.growthTracker++
	if d.growthTracker == d.GrowthInterval {
		d.growthTracker = 0
		d.hysteresisTracker = d.Hysteresis
		if grown := d.scale * d.GrowthFactor; !math.IsInf(float64(grown), 1) {
			d.scale = grown
		}
	}
}

// State returns S, g and h.
func (d *DynamicGradScaler) State() ScalerState {
	return ScalerState{Scale: d.scale, GrowthTracker: d.growthTracker, HysteresisTracker: d.hysteresisTracker}
}

// Load restores st if it satisfies the invariants Update keeps under this
// scaler's settings:
//
//	MinScale ≤ S < +Inf,  0 ≤ g < GrowthInterval,  h ≤ Hysteresis
//
// and otherwise returns an error naming each offending field, leaving the
// scaler unchanged. A state outside them is corrupt or was saved under
// other --min-loss-scale, --loss-scale-window or --hysteresis flags (a
// growth tracker at or past the window would never grow the scale again).
// A checkpoint without a scaler state should not be loaded at all: the
// scaler then starts afresh, as Megatron's does.
func (d *DynamicGradScaler) Load(st ScalerState) error {
	errs := []error{st.Validate()}
	if st.Scale < d.MinScale {
		errs = append(errs, fmt.Errorf("optim: grad scaler state: scale %g is below --min-loss-scale %g", st.Scale, d.MinScale))
	}
	if st.GrowthTracker >= d.GrowthInterval {
		errs = append(errs, fmt.Errorf("optim: grad scaler state: growth_tracker %d is not below --loss-scale-window %d", st.GrowthTracker, d.GrowthInterval))
	}
	if st.HysteresisTracker > d.Hysteresis {
		errs = append(errs, fmt.Errorf("optim: grad scaler state: hysteresis_tracker %d exceeds --hysteresis %d", st.HysteresisTracker, d.Hysteresis))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d.scale, d.growthTracker, d.hysteresisTracker = st.Scale, st.GrowthTracker, st.HysteresisTracker
	return nil
}

// UnscaleAndCheck sets g ← invScale·g for every element of every slice in
// grads (Megatron's _unscale_main_grads_and_check_for_nan) and reports
// whether any result is NaN or ±Inf. Every element is scaled even after a
// non-finite one is found.
//
// The check reads the unscaled values. A non-finite gradient stays
// non-finite under multiplication by a finite invScale > 0, so this reports
// everything torch's _amp_foreach_non_finite_check_and_unscale_ (which
// checks the scaled input) reports; when invScale > 1 (a scale below 1) it
// also reports a finite gradient that unscaling pushed past ±MaxFloat32,
// which torch would hand to the optimizer as ±Inf.
//
// The result is local to this rank. Before calling Update, the caller must
// all-reduce it as a MAX (for example a one-element comm.F32 buffer holding
// 0 or 1, reduced with comm.Max) over every rank that holds gradients of
// the model — the model-parallel group, and with a distributed optimizer
// the data-parallel ranks owning the other shards (Megatron's
// grad-stats-parallel group) — so that all ranks update their scalers alike
// and, when the reduced flag is true, all skip the optimizer step.
func UnscaleAndCheck(grads [][]float32, invScale float32) (foundInf bool) {
	for _, g := range grads {
		if invScale != 1 {
			kernels.Scale(g, invScale)
		}
		if !foundInf {
			foundInf = anyNonFinite(g)
		}
	}
	return foundInf
}

// Bit patterns of the finiteness check. A float32 is NaN or ±Inf exactly
// when its eight exponent bits are all ones; adding the exponent's lowest
// bit to the masked exponent then carries into bit 31, and only then. Two
// float32 are checked at once as the two 32-bit lanes of a uint64: a lane
// sums to at most 0x80000000, so no carry crosses into the other lane.
const (
	f32Exp    = 0x7f800000 // exponent bits
	f32ExpLSB = 0x00800000 // lowest exponent bit
	f32Carry  = 0x80000000 // where (bits&f32Exp)+f32ExpLSB carries for NaN/±Inf
	pairExp   = f32Exp<<32 | f32Exp
	pairLSB   = f32ExpLSB<<32 | f32ExpLSB
	pairCarry = f32Carry<<32 | f32Carry
)

// nonFinite32 reports whether v is NaN or ±Inf.
func nonFinite32(v float32) bool { return math.Float32bits(v)&f32Exp == f32Exp }

// anyNonFinite reports whether x holds a NaN or ±Inf. It reads x as
// 8-byte-aligned uint64 pairs (after at most one leading element) and ORs
// the carries of
//
//	(w & pairExp) + pairLSB
//
// over four pairs per iteration with no branch per element. On amd64 this
// runs about five times as fast as a loop over math.IsNaN and math.IsInf,
// and nearly three times as fast as a branch on each element's bits.
func anyNonFinite(x []float32) bool {
	if len(x) == 0 {
		return false
	}
	if uintptr(unsafe.Pointer(&x[0]))%8 != 0 {
		if nonFinite32(x[0]) {
			return true
		}
		x = x[1:]
	}
	n := len(x) / 2
	if n > 0 {
		// x[:2n] as n uint64: 8-byte aligned and inside x's array.
		w := unsafe.Slice((*uint64)(unsafe.Pointer(&x[0])), n)
		var a0, a1 uint64
		for len(w) >= 4 {
			q := w[:4:4]
			a0 |= (q[0]&pairExp + pairLSB) | (q[1]&pairExp + pairLSB)
			a1 |= (q[2]&pairExp + pairLSB) | (q[3]&pairExp + pairLSB)
			w = w[4:]
		}
		for _, v := range w {
			a0 |= v&pairExp + pairLSB
		}
		if (a0|a1)&pairCarry != 0 {
			return true
		}
	}
	return len(x)%2 == 1 && nonFinite32(x[len(x)-1])
}
