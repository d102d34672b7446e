package dp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// DDP wraps a model chunk's parameters for data-parallel training.
type DDP struct {
	cfg    config.DDPConfig
	params []*nn.Parameter
	group  comm.Group // the dp×cp group; nil or size 1 means no reduction

	// GradData is the contiguous gradient buffer; each parameter's Grad is a
	// view of it.
	GradData []float32
	offsets  map[*nn.Parameter]int

	// GradientScalingFactor multiplies the buffer before a SUM all-reduce:
	// 1/(dp·cp), or 1 with average_in_collective (the collective averages)
	// or calculate_per_token_loss (the loss is normalised by the global
	// token count later).
	GradientScalingFactor float32

	// Workers is the number of goroutines buffer-wide loops may use.
	Workers int

	syncEnabled bool
	pending     bool
}

// New builds the gradient buffer for params and points each parameter's
// Grad at its view. group is the dp×cp group the gradients are reduced over
// (nil for a single rank). calculatePerTokenLoss is the model config's
// setting of that name.
func New(params []*nn.Parameter, group comm.Group, cfg config.DDPConfig, calculatePerTokenLoss bool) (*DDP, error) {
	if cfg.UseDistributedOptimizer || cfg.OverlapGradReduce || cfg.OverlapParamGather {
		return nil, fmt.Errorf("dp: use_distributed_optimizer, overlap_grad_reduce and overlap_param_gather are not built yet in gotron; leave them off")
	}
	if cfg.AverageInCollective && calculatePerTokenLoss {
		return nil, fmt.Errorf("dp: average_in_collective with calculate_per_token_loss: the per-token loss is normalised by the global token count, so the collective must sum; turn one off")
	}
	d := &DDP{cfg: cfg, params: params, group: group, offsets: map[*nn.Parameter]int{}, syncEnabled: true}
	n := 0
	for i := len(params) - 1; i >= 0; i-- {
		d.offsets[params[i]] = n
		n += params[i].Value.Len()
	}
	d.GradData = make([]float32, n)
	for _, p := range params {
		off := d.offsets[p]
		p.Grad = tensor.FromSlice(d.GradData[off:off+p.Value.Len()], p.Value.Shape()...)
	}
	size := 1
	if group != nil {
		size = group.Size()
	}
	d.GradientScalingFactor = 1 / float32(size)
	if cfg.AverageInCollective || calculatePerTokenLoss {
		d.GradientScalingFactor = 1
	}
	return d, nil
}

// Parameters returns the wrapped parameters.
func (d *DDP) Parameters() []*nn.Parameter { return d.params }

// ZeroGradBuffer zeroes every gradient (zero_grad_buffer).
func (d *DDP) ZeroGradBuffer() {
	kernels.ParallelFor(len(d.GradData), max(1, min(d.Workers, len(d.GradData)>>16)), func(lo, hi int) {
		clear(d.GradData[lo:hi])
	})
	d.pending = false
}

// NoSync disables gradient synchronisation until the returned function is
// called (no_sync): gradients of the micro-batches run inside it only
// accumulate. In the basic form synchronisation happens in FinishGradSync
// anyway; NoSync makes StartGradSync a no-op while it is active.
func (d *DDP) NoSync() (resume func()) {
	prev := d.syncEnabled
	d.syncEnabled = false
	return func() { d.syncEnabled = prev }
}

// StartGradSync marks the gradients ready for reduction
// (start_grad_sync). In the basic form the reduction itself runs in
// FinishGradSync.
func (d *DDP) StartGradSync(ctx context.Context) error {
	if d.syncEnabled {
		d.pending = true
	}
	return nil
}

// FinishGradSync reduces the gradient buffer over the data-parallel group
// (finish_grad_sync): one all-reduce, SUM of the pre-scaled buffer, or AVG
// with average_in_collective.
func (d *DDP) FinishGradSync(ctx context.Context) error {
	d.pending = false
	if d.group == nil || d.group.Size() == 1 {
		if d.GradientScalingFactor != 1 {
			kernels.Scale(d.GradData, d.GradientScalingFactor)
		}
		return nil
	}
	op := comm.Sum
	if d.cfg.AverageInCollective {
		op = comm.Avg
	} else if d.GradientScalingFactor != 1 {
		kernels.Scale(d.GradData, d.GradientScalingFactor)
	}
	if err := d.group.AllReduce(ctx, comm.F32(d.GradData), op); err != nil {
		return fmt.Errorf("dp: gradient all-reduce over %s: %w", d.group.Name(), err)
	}
	return nil
}

// ScaleGradients multiplies every gradient by s (scale_gradients).
func (d *DDP) ScaleGradients(s float32) { kernels.Scale(d.GradData, s) }

// BroadcastParams copies every parameter from the group's rank 0 to the
// others (broadcast_params), so all data-parallel replicas start equal.
func (d *DDP) BroadcastParams(ctx context.Context) error {
	if d.group == nil || d.group.Size() == 1 {
		return nil
	}
	for _, p := range d.params {
		if err := d.group.Broadcast(ctx, comm.F32(p.Value.Data()), 0); err != nil {
			return fmt.Errorf("dp: broadcast of %s over %s: %w", p.Name, d.group.Name(), err)
		}
	}
	return nil
}

// FinalizeModelGrads is the data-parallel part of Megatron's
// finalize_model_grads: finish every chunk's gradient synchronisation.
// With numTokens set (calculate_per_token_loss), the caller has all-reduced
// the token count and the gradients are then scaled by 1/max(numTokens, 1).
func FinalizeModelGrads(ctx context.Context, chunks []*DDP, numTokens *int64) error {
	for _, d := range chunks {
		if err := d.FinishGradSync(ctx); err != nil {
			return err
		}
	}
	if numTokens != nil {
		s := float32(1 / float64(max(*numTokens, 1)))
		for _, d := range chunks {
			d.ScaleGradients(s)
		}
	}
	return nil
}
