package optim

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/nn"
)

// Optimizer is what a training iteration does once its gradients are
// reduced (Megatron's MegatronOptimizer: prepare_grads, then
// step_with_ready_grads): one type for the plain optimizer (NewPlain) and
// the distributed one (NewDistributed), so a trainer has no branch on
// which it holds.
type Optimizer interface {
	// Prepare makes the main gradients ready: 16-bit gradients widened
	// into float32 main gradients and, with a loss scaler, unscaled and
	// checked for NaN and ±Inf on every rank holding gradients (the
	// scaler updated by the outcome). ok false means the scaler skips this
	// iteration's update; else gradNorm is the global L2 norm of the main
	// gradients (non-finite if they are).
	Prepare(ctx context.Context) (ok bool, gradNorm float64, err error)
	// Update clips the main gradients to the configured norm (given the
	// norm Prepare returned) and updates the parameters with the step's
	// learning rate and weight decay h; under the distributed optimizer it
	// then all-gathers the updated parameters, unless overlap_param_gather
	// leaves that to the next forward pass.
	Update(ctx context.Context, h Hyper, gradNorm float64) error
	// Adam is the update's state: its segments (parameters, moments, main
	// parameters) and step count, which checkpoints save and load.
	Adam() *Adam
	// Scaler is the loss scaler (nil: none).
	Scaler() GradScaler
	// ParamsNorm and ZerosInGrad are the main parameters' global L2 norm
	// and the main gradients' global count of zero elements, each element
	// counted once (--log-params-norm, --log-num-zeros-in-grad):
	// collectives every rank calls.
	ParamsNorm(ctx context.Context) (float64, error)
	ZerosInGrad(ctx context.Context) (float64, error)
}

// Step runs Prepare and, unless the scaler skips the iteration or the
// norm is not finite (ErrNonFiniteNorm), Update.
func Step(ctx context.Context, o Optimizer, h Hyper) (ok bool, gradNorm float64, err error) {
	ok, norm, err := o.Prepare(ctx)
	if err != nil || !ok {
		return ok, norm, err
	}
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return false, norm, fmt.Errorf("%w: %g", ErrNonFiniteNorm, norm)
	}
	return true, norm, o.Update(ctx, h, norm)
}

// ErrNonFiniteNorm is Step's refusal to update with a NaN or infinite
// gradient norm.
var ErrNonFiniteNorm = errors.New("optim: the gradient norm is not finite")

// Options are what NewPlain and NewDistributed share besides Adam's
// hyper-parameters.
type Options struct {
	// Scaler is the loss scaler (nil: none; bf16 and float32 runs).
	Scaler GradScaler
	// FoundInf is the group the scaler's NaN/Inf finding is agreed over:
	// every rank holding a piece of the gradients (the world). Nil or a
	// group of one: this rank alone.
	FoundInf comm.Group
	// ClipGrad is the global norm gradients are clipped to (≤ 0: none).
	ClipGrad float64
	// Norm says how the global gradient norm is summed: each part adds
	// the squares of the main gradients of the parameters it counts over
	// its group; the norm is the square root of the parts' sum, in order.
	Norm []NormPart
}

// NormPart is one sum of squares of the gradient norm: over Group (nil:
// this rank), of the parameters Counts accepts on this rank (nil: all).
// A model without experts has one part, over the model-parallel group; a
// MoE model a second for the experts, over the expert model-parallel
// group, where each expert's weights live once.
type NormPart struct {
	Group  comm.Group
	Counts func(*nn.Parameter) bool
}

// base is the step sequence both optimizers share.
type base struct {
	adam *Adam
	o    Options
}

func (b *base) Adam() *Adam        { return b.adam }
func (b *base) Scaler() GradScaler { return b.o.Scaler }

// Prepare implements Optimizer.
func (b *base) Prepare(ctx context.Context) (bool, float64, error) {
	b.adam.CopyGradsToMain()
	if s := b.o.Scaler; s != nil {
		found := []float32{0}
		if b.adam.UnscaleAndCheck(s.InvScale()) {
			found[0] = 1
		}
		if g := b.o.FoundInf; g != nil && g.Size() > 1 {
			if err := g.AllReduce(ctx, comm.F32(found), comm.Max); err != nil {
				return false, 0, fmt.Errorf("loss scaler: found-inf all-reduce over %s: %w", g.Name(), err)
			}
		}
		s.Update(found[0] != 0)
		if found[0] != 0 {
			return false, math.NaN(), nil
		}
	}
	norm, err := b.norm(ctx)
	return true, norm, err
}

// norm is the global L2 norm of the main gradients (Options.Norm).
func (b *base) norm(ctx context.Context) (float64, error) {
	total, err := b.overParts(ctx, b.adam.SumSquares)
	return math.Sqrt(total), err
}

// ParamsNorm returns the global L2 norm of the main parameters, each
// element counted once as the gradient norm counts it (Options.Norm):
// Megatron's calc_params_l2_norm (--log-params-norm). A collective over
// the norm's groups: every rank calls it.
func (b *base) ParamsNorm(ctx context.Context) (float64, error) {
	total, err := b.overParts(ctx, b.adam.SumParamSquares)
	return math.Sqrt(total), err
}

// ZerosInGrad returns how many elements of the main gradients are zero,
// each counted once as the gradient norm counts it: Megatron's
// count_zeros_fp32 (--log-num-zeros-in-grad). A collective, as
// ParamsNorm.
func (b *base) ZerosInGrad(ctx context.Context) (float64, error) {
	return b.overParts(ctx, b.adam.CountZeroGrads)
}

// overParts sums a per-rank quantity of the parameters each part of
// Options.Norm counts over that part's group, the parts in order.
func (b *base) overParts(ctx context.Context, local func(owned func(*nn.Parameter) bool) float64) (float64, error) {
	var total float64
	for _, p := range b.o.Norm {
		s, err := GlobalSquares(ctx, local(p.Counts), p.Group)
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

// clipAndUpdate clips to the norm and takes the Adam step.
func (b *base) clipAndUpdate(h Hyper, norm float64) error {
	b.adam.ClipGradients(norm, b.o.ClipGrad)
	return b.adam.Step(h)
}

// plain is the plain optimizer: every rank updates whole parameters.
type plain struct{ base }

// NewPlain returns the plain optimizer over params: Adam with cfg, every
// rank updating the whole parameters it holds (their gradients reduced
// over data parallelism by dp.DDP).
func NewPlain(params []*nn.Parameter, cfg AdamConfig, o Options) Optimizer {
	return &plain{base{adam: NewAdam(params, cfg), o: o}}
}

// Update implements Optimizer.
func (l *plain) Update(_ context.Context, h Hyper, norm float64) error {
	return l.clipAndUpdate(h, norm)
}

// distributed is the distributed optimizer behind the interface.
type distributed struct {
	base
	d *DistributedOptimizer
}

// NewDistributed returns the distributed optimizer over the buffers of
// ddps (NewDistributedOptimizer), the gradient norm summed as o.Norm
// says (one part: the optimizer instance's ranks).
func NewDistributed(ddps []dp.Wrapper, cfg AdamConfig, o Options) (Optimizer, error) {
	d, err := NewDistributedOptimizer(ddps, cfg)
	if err != nil {
		return nil, err
	}
	return &distributed{base: base{adam: d.Adam, o: o}, d: d}, nil
}

// Update implements Optimizer: the shards' update, then the parameters'
// all-gather (DistributedOptimizer.Step).
func (o *distributed) Update(ctx context.Context, h Hyper, norm float64) error {
	o.adam.ClipGradients(norm, o.o.ClipGrad)
	return o.d.Step(ctx, h)
}
