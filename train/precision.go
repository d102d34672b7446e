package train

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/tensor"
)

// Mixed precision, as Megatron's training layer sets it up:
//
//   - --bf16: bfloat16 parameters, float32 main parameters in the
//     optimizer, gradients accumulated and reduced in float32
//     (accumulate_allreduce_grads_in_fp32 is turned on unless
//     --grad-reduce-in-bf16), no loss scaling unless --loss-scale.
//   - --fp16: float16 parameters, float32 main parameters, gradients in
//     float16 unless --accumulate-allreduce-grads-in-fp32, a constant
//     --loss-scale or else the dynamic loss scaler; with the dynamic
//     scaler a NaN or Inf gradient skips the step and lowers the scale
//     instead of stopping the run, so check_for_nan_in_grad is turned off.
//
// In both, activations stay float32 between GEMMs and every GEMM rounds
// its inputs to the parameters' type and accumulates in float32
// (tensor.Gemm). Pipeline messages therefore travel in float32 unless
// pipeline_dtype says otherwise (the reference sends its 16-bit
// activations): a stage boundary rounds nothing, and a pipelined
// mixed-precision run keeps the one-rank numbers.

// Precision holds the mixed-precision settings besides --bf16/--fp16.
// LossScale is --loss-scale: a constant loss scale (0: none for bf16, the
// dynamic scaler for fp16, whose settings are InitialLossScale,
// MinLossScale, LossScaleWindow and Hysteresis). GradReduceInBF16 keeps a
// bf16 model's gradients in bfloat16 (--grad-reduce-in-bf16); otherwise
// bf16 accumulates and reduces them in float32, as Megatron does.
type Precision struct {
	LossScale        float64
	InitialLossScale float64
	MinLossScale     float64
	LossScaleWindow  int
	Hysteresis       int
	GradReduceInBF16 bool
}

// DefaultPrecision returns Megatron's defaults: no constant scale; the
// dynamic scaler starts at 2³², never goes below 1, doubles after 1000
// clean iterations and halves after 2 non-finite ones.
func DefaultPrecision() Precision {
	return Precision{InitialLossScale: 1 << 32, MinLossScale: 1, LossScaleWindow: 1000, Hysteresis: 2}
}

// ResolvePrecision derives the dtypes and DDP settings of --bf16/--fp16, as
// training does before it validates the arguments.
func (a Args) ResolvePrecision() Args {
	mp := &a.Model.ModelParallelConfig
	if mp.BF16 && mp.FP16 {
		return a // refused by Validate
	}
	if (mp.BF16 || mp.FP16) && mp.PipelineDType == config.DTypeNone {
		mp.PipelineDType = config.Float32
	}
	switch {
	case mp.BF16:
		mp.ParamsDType = config.BFloat16
		if !a.GradReduceInBF16 {
			a.DDP.GradReduceInFP32 = true
		}
	case mp.FP16:
		mp.ParamsDType = config.Float16
		if a.LossScale == 0 {
			// Non-finite losses and gradients are the dynamic scaler's
			// signal to skip a step (Megatron turns the whole
			// --check-for-nan-in-loss-and-grad off here too).
			a.DDP.CheckForNaNInGrad, a.CheckForNaNInLossAndGrad = false, false
		}
	}
	if (mp.BF16 || mp.FP16) && a.DDP.GradReduceInFP32 {
		// float32 gradients are summed in float32 already (Megatron turns
		// the all-to-all form off with a warning).
		a.DDP.ReduceScatterWithFP32Accumulation = false
	}
	return a
}

// precisionErrors reports mixed-precision flags that cannot work or would
// be ignored.
func (a Args) precisionErrors() []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	mp := a.Model.ModelParallelConfig
	// --bf16 with --fp16 is refused by the model config's own rule.
	if a.GradReduceInBF16 && !mp.BF16 {
		add("--grad-reduce-in-bf16 keeps a bfloat16 model's gradients in bfloat16, and --bf16 is not set: add --bf16 or drop the flag")
	}
	if a.LossScale < 0 {
		add("--loss-scale %g: must be positive (or 0 for none with --bf16, the dynamic scaler with --fp16)", a.LossScale)
	}
	if a.LossScale > 0 && !mp.BF16 && !mp.FP16 {
		add("--loss-scale %g scales the loss of a 16-bit model, and neither --bf16 nor --fp16 is set: add one or drop --loss-scale", a.LossScale)
	}
	def := DefaultPrecision()
	dynamicFlags := a.InitialLossScale != def.InitialLossScale || a.MinLossScale != def.MinLossScale ||
		a.LossScaleWindow != def.LossScaleWindow || a.Hysteresis != def.Hysteresis
	switch {
	case dynamicFlags && (!mp.FP16 || a.LossScale > 0):
		add("--initial-loss-scale, --min-loss-scale, --loss-scale-window and --hysteresis set the dynamic loss scaler, which only --fp16 without --loss-scale uses: drop them, or train with --fp16")
	case mp.FP16 && a.LossScale == 0:
		if err := a.dynamicScaler().Validate(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return errs
}

// dynamicScaler returns the dynamic loss scaler's settings.
func (a Args) dynamicScaler() optim.DynamicScalerConfig {
	c := optim.DefaultDynamicScalerConfig()
	c.InitialScale, c.MinScale = float32(a.InitialLossScale), float32(a.MinLossScale)
	c.GrowthInterval, c.Hysteresis = a.LossScaleWindow, a.Hysteresis
	return c
}

// newScaler returns the run's loss scaler (Megatron's
// get_megatron_optimizer): constant with --loss-scale, dynamic for fp16
// without it, none otherwise (nil).
func (a Args) newScaler() (optim.GradScaler, error) {
	mp := a.Model.ModelParallelConfig
	switch {
	case a.LossScale > 0 && (mp.BF16 || mp.FP16):
		return optim.NewConstantGradScaler(float32(a.LossScale))
	case mp.FP16:
		return optim.NewDynamicGradScaler(a.dynamicScaler())
	}
	return nil, nil
}

// ParamDType is the storage type of the model's parameters (--bf16,
// --fp16, else float32).
func (a Args) ParamDType() tensor.DType {
	switch {
	case a.Model.BF16:
		return tensor.BFloat16
	case a.Model.FP16:
		return tensor.Float16
	}
	return tensor.Float32
}

// lossScale returns the current loss scale for the log (NaN without a
// scaler).
func (t *trainer) lossScale() float64 {
	sc := t.opt.Scaler()
	if sc == nil {
		return math.NaN()
	}
	return float64(sc.Scale())
}

// scalerState is the loss scaler's state for a checkpoint (nil without a
// scaler).
func (t *trainer) scalerState() json.RawMessage {
	sc := t.opt.Scaler()
	if sc == nil {
		return nil
	}
	b, err := json.Marshal(sc.State())
	if err != nil {
		panic(err) // three numbers always marshal
	}
	return b
}

// loadScaler restores a checkpoint's loss-scaler state. A checkpoint
// without one (a float32 or bf16 run) leaves a new scaler at its initial
// state; a saved state is ignored by a run without a scaler.
func (t *trainer) loadScaler(raw json.RawMessage) error {
	sc := t.opt.Scaler()
	if sc == nil || len(raw) == 0 {
		return nil
	}
	var st optim.ScalerState
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("the loss scaler's state is corrupt: %w", err)
	}
	if err := sc.Load(st); err != nil {
		return fmt.Errorf("the loss scaler's state: %w", err)
	}
	return nil
}

// precisionDesc describes the run's precision for the start-up line.
func (t *trainer) precisionDesc() string {
	d := t.a.ParamDType()
	if d == tensor.Float32 {
		return "float32"
	}
	grads := "float32"
	if !t.a.DDP.GradReduceInFP32 {
		grads = d.String()
	}
	s := fmt.Sprintf("%v with float32 main parameters and %s gradients", d, grads)

	switch sc := t.opt.Scaler().(type) {
	case nil:
		s += ", no loss scaling"
	case *optim.DynamicGradScaler:
		s += fmt.Sprintf(", dynamic loss scale from %g", sc.Scale())
	default:
		s += fmt.Sprintf(", loss scale %g", sc.Scale())
	}
	return s
}
