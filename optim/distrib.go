package optim

import (
	"context"
	"fmt"
	"math"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/dp"
)

// DistributedOptimizer is Adam sharded over the data-parallel ranks
// (Megatron's DistributedOptimizer, docs/SEMANTICS.md § Distributed optimizer
// shards): each rank owns 1/dp of every gradient bucket (its shard,
// dp.Layout.Shard) and keeps the optimizer state of the parameter elements in
// it only. After the gradients are reduce-scattered into the shards (dp.DDP),
// Step updates the shard's main parameters — float32 parameters are their
// own, views of the buffers; 16-bit ones have float32 copies of the shard
// only (Segment.Main), rounded back into the buffer after the update — and
// all-gathers every bucket's parameters in the buffer's dtype, at once or,
// under overlap_param_gather, bucket by bucket as the next forward pass
// reaches them (dp.DDP.ParamPreHook).
type DistributedOptimizer struct {
	*Adam
	DDPs []dp.Wrapper
}

// NewDistributedOptimizer builds the optimizer over this rank's shards of
// the wrappers' state (one or two per model chunk: dp.DDP built with
// use_distributed_optimizer, or dp.FSDP). The gradient norm is the
// Optimizer's (NewDistributed, Options.Norm).
func NewDistributedOptimizer(ddps []dp.Wrapper, cfg AdamConfig) (*DistributedOptimizer, error) {
	var segs []Segment
	for _, d := range ddps {
		if !d.Config().UseDistributedOptimizer {
			return nil, fmt.Errorf("optim: the distributed optimizer needs buffers built with use_distributed_optimizer")
		}
		pieces, err := d.OptimizerShards()
		if err != nil {
			return nil, err
		}
		for _, sp := range pieces {
			segs = append(segs, Segment{Param: sp.Param, Offset: sp.Offset, Len: sp.Len, Model: sp.Model, GradSrc: sp.Grad})
		}
	}
	return &DistributedOptimizer{Adam: NewAdamSegments(segs, cfg), DDPs: ddps}, nil
}

// Step updates this rank's shards with the step's learning rate and
// weight decay h, then lets each wrapper bring the update to its
// parameters (dp.Wrapper.ParamsUpdated).
func (o *DistributedOptimizer) Step(ctx context.Context, h Hyper) error {
	if err := o.Adam.Step(h); err != nil {
		return err
	}
	for _, d := range o.DDPs {
		if err := d.ParamsUpdated(ctx); err != nil {
			return err
		}
	}
	return nil
}

// GlobalNorm returns sqrt(Σ over g of every member's local sum of
// squares) (GlobalSquares).
func GlobalNorm(ctx context.Context, local float64, g comm.Group) (float64, error) {
	total, err := GlobalSquares(ctx, local, g)
	return math.Sqrt(total), err
}

// GlobalSquares returns Σ over g of every member's local sum of squares;
// nil or a group of one gives local. The sums travel as float32 pairs
// (hi, lo) so that the float64 sum keeps its precision through a float32
// collective, and are added in rank order, so every member gets the same
// sum.
func GlobalSquares(ctx context.Context, local float64, g comm.Group) (float64, error) {
	if g == nil || g.Size() == 1 {
		return local, nil
	}
	hi := float32(local)
	buf := make([]float32, 2*g.Size())
	mine := []float32{hi, float32(local - float64(hi))}
	if err := g.AllGather(ctx, comm.F32(buf), comm.F32(mine)); err != nil {
		return 0, fmt.Errorf("optim: gradient norm all-gather over %s: %w", g.Name(), err)
	}
	var total float64
	for r := 0; r < g.Size(); r++ {
		total += float64(buf[2*r]) + float64(buf[2*r+1])
	}
	return total, nil
}
