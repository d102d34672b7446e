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

// FinalizeOptions are the groups and settings FinalizeModelGrads needs
// beyond the model chunks (Megatron's pg_collection, num_tokens and the
// config's sequence_parallel).
type FinalizeOptions struct {
	// NumTokens, when set (calculate_per_token_loss), is the global token
	// count, already all-reduced by the caller: the gradients are scaled by
	// 1/max(NumTokens, 1).
	NumTokens *int64
	// TP is the tensor-parallel group; nil or size 1 skips the TP step.
	TP comm.Group
	// SequenceParallel is the model config's sequence_parallel: the
	// gradients of parameters marked SequenceParallel (layer norms, and
	// row-parallel biases) are partial sums over the TP ranks' sequence
	// shards, and are all-reduced over TP.
	SequenceParallel bool
	// Embedding is the embedding group (the first and last pipeline stages)
	// and EmbeddingParams the shared word-embedding weights this rank holds
	// in it (the first chunk's on the first stage, the last chunk's on the
	// last stage): their gradients are summed over the group, so both
	// copies of the tied weight get the gradient of the whole model. Nil or
	// a group of one skips the step.
	Embedding       comm.Group
	EmbeddingParams []*nn.Parameter
}

// FinalizeModelGrads is Megatron's finalize_model_grads for the dimensions
// gotron builds so far (megatron-semantics.md §2.17, steps 1, 4, 6 and 10):
// finish every chunk's data-parallel gradient synchronisation; under
// sequence parallelism all-reduce (SUM) the gradients of SequenceParallel
// parameters over the tensor-parallel group, coalesced into one buffer;
// all-reduce (SUM) the shared word embedding's gradient over the embedding
// group; scale by the global token count when o.NumTokens is set.
// Afterwards every tensor-parallel rank holds identical gradients for the
// parameters it replicates, and the first and last pipeline stages
// identical gradients for the tied embedding.
func FinalizeModelGrads(ctx context.Context, chunks []*DDP, o FinalizeOptions) error {
	for _, d := range chunks {
		if err := d.FinishGradSync(ctx); err != nil {
			return err
		}
	}
	if o.SequenceParallel && o.TP != nil && o.TP.Size() > 1 {
		if err := allReduceSequenceParallelGrads(ctx, chunks, o.TP); err != nil {
			return err
		}
	}
	if o.Embedding != nil && o.Embedding.Size() > 1 {
		if err := allReduceGrads(ctx, o.EmbeddingParams, o.Embedding, "the shared word embedding"); err != nil {
			return err
		}
	}
	if o.NumTokens != nil {
		s := float32(1 / float64(max(*o.NumTokens, 1)))
		for _, d := range chunks {
			d.ScaleGradients(s)
		}
	}
	return nil
}

// allReduceSequenceParallelGrads sums the gradients of every
// SequenceParallel parameter over tp in one coalesced all-reduce.
func allReduceSequenceParallelGrads(ctx context.Context, chunks []*DDP, tp comm.Group) error {
	var ps []*nn.Parameter
	n := 0
	for _, d := range chunks {
		for _, p := range d.params {
			if p.SequenceParallel && p.Grad != nil {
				ps = append(ps, p)
				n += p.Grad.Len()
			}
		}
	}
	if n == 0 {
		return nil
	}
	return allReduceGrads(ctx, ps, tp, fmt.Sprintf("the sequence-parallel gradients (%d parameters)", len(ps)))
}

// allReduceGrads sums the gradients of ps over g in one coalesced
// all-reduce; what names them in errors.
func allReduceGrads(ctx context.Context, ps []*nn.Parameter, g comm.Group, what string) error {
	n := 0
	for _, p := range ps {
		n += p.Grad.Len()
	}
	buf := make([]float32, 0, n)
	for _, p := range ps {
		buf = append(buf, p.Grad.Data()...)
	}
	if err := g.AllReduce(ctx, comm.F32(buf), comm.Sum); err != nil {
		return fmt.Errorf("dp: all-reduce of %s over %s: %w", what, g.Name(), err)
	}
	off := 0
	for _, p := range ps {
		off += copy(p.Grad.Data(), buf[off:off+p.Grad.Len()])
	}
	return nil
}
