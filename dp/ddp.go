package dp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// Options are what New needs beyond the parameters and the config.
type Options struct {
	// Group is the group gradients are reduced over: the data-parallel
	// ranks (dp·cp), or under the distributed optimizer with several
	// instances the ranks of this rank's instance (intra-dp-cp). Nil for a
	// single rank.
	Group comm.Group
	// Inter is the group of the ranks holding the same shard in the other
	// distributed-optimizer instances (inter-dist-opt); nil or size 1 with
	// one instance.
	Inter comm.Group
	// BucketSize is the resolved bucket size (BucketSize):
	// config.NoBucketing, 0 for a bucket per parameter, or a size.
	BucketSize int
	// DisableBucketing puts every bucket in one bucket group (the
	// reference's disable_bucketing, set for model chunks after the first).
	DisableBucketing bool
	// SharedEmbedding is the word embedding when it is tied across
	// pipeline stages (it gets a bucket of its own under the distributed
	// optimizer), else nil.
	SharedEmbedding *nn.Parameter
	// CalculatePerTokenLoss is the model config's calculate_per_token_loss.
	CalculatePerTokenLoss bool
	// AverageOver is the number of replicas the gradients are averaged
	// over when it differs from the reduction group's (0: the group's size
	// times Inter's). An expert buffer reduces over the expert
	// data-parallel group but averages over the dense dp·cp replicas, as
	// the reference's expert_gradient_scaling_factor does: 1/(dp·cp), or
	// edp/(dp·cp) before an averaging collective.
	AverageOver int
	// ParamDType is the type the parameters are stored in (the reference's
	// param_dtype): Float32 (the zero value), or BFloat16 / Float16 under
	// --bf16 / --fp16, each parameter's float32 value being rounded to
	// nearest even into the buffer. The gradients are float32 under
	// grad_reduce_in_fp32, else of this type (GradDTypeFor).
	ParamDType tensor.DType
	// Workers is the number of goroutines the buffer-wide loops (zeroing,
	// scaling the gradients) may use; 0 or 1: the caller's only.
	Workers int
}

// DDP wraps a model chunk's parameters for data-parallel training
// (DistributedDataParallel): their values and gradients live in a Buffer
// cut into buckets; each bucket's gradients are reduced over the
// data-parallel group — as soon as they are complete under
// overlap_grad_reduce, else in FinishGradSync — by an all-reduce, or a
// reduce-scatter into this rank's shard under the distributed optimizer,
// which then all-gathers the updated parameters (StartParamSync, or
// under overlap_param_gather a forward pre-hook, ParamPreHook). The
// buffer's types are Buffer.ParamDType and Buffer.GradDType; every
// collective carries them (see the package doc's Precision).
type DDP struct {
	cfg    config.DDPConfig
	Buffer *Buffer
	groups []*bucketGroup
	byParm map[*nn.Parameter]*bucketGroup

	group, inter  comm.Group
	shards        int // ranks a bucket is sharded over (the group's size)
	shardRank     int
	largest       []float64 // per bucket: the largest local norm seen (check_for_large_grads)
	syncOff       int       // nesting depth of NoSync
	hookErr                 // the first failure in a grad hook
	hookParamSync bool
	workers       int // Options.Workers
}

// New lays out params (one model chunk's, in registration order:
// gpt.Model.RegisteredParameters) in a Buffer — ChunkLayout's layout
// with o's bucket size, the distributed optimizer's when
// cfg.UseDistributedOptimizer — moves their values and gradients into it,
// and installs the grad hooks (the reductions they start run under the
// backward pass's context).
func New(params []*nn.Parameter, cfg config.DDPConfig, o Options) (*DDP, error) {
	if err := checkConfig(cfg, o); err != nil {
		return nil, err
	}
	d := &DDP{cfg: cfg, shards: 1, workers: o.Workers, byParm: map[*nn.Parameter]*bucketGroup{}}
	// A group of one rank reduces nothing: it is kept as nil so that no
	// collective is issued for it.
	if o.Group != nil && o.Group.Size() > 1 {
		d.group, d.shards, d.shardRank = o.Group, o.Group.Size(), o.Group.Rank()
	}
	if o.Inter != nil && o.Inter.Size() > 1 {
		d.inter = o.Inter
	}
	lps := make([]LayoutParam, len(params))
	for i, p := range params {
		lps[i] = LayoutParam{Name: p.Name, Numel: p.Value.Len(), SharedEmbedding: p == o.SharedEmbedding}
	}
	var l Layout
	if cfg.UseDistributedOptimizer {
		l = DistOptLayout(lps, o.BucketSize, d.shards, cfg.PadBucketsForHighNCCLBusBW)
	} else {
		l = DefaultLayout(lps, o.BucketSize)
	}
	b, err := NewBuffer(params, l, BufferOptions{
		ParamDType:            o.ParamDType,
		GradDType:             GradDTypeFor(o.ParamDType, cfg.GradReduceInFP32),
		FP32LocalAccumulation: cfg.ParamNamePatternsForFP32LocalAccumulation,
	})
	if err != nil {
		return nil, err
	}
	d.Buffer = b
	d.largest = make([]float64, len(b.Buckets))
	dpcp := d.shards
	if d.inter != nil {
		dpcp *= d.inter.Size()
	}
	factor := float32(1)
	switch {
	case o.CalculatePerTokenLoss:
	case cfg.AverageInCollective && o.AverageOver > 0:
		factor = float32(dpcp) / float32(o.AverageOver)
	case cfg.AverageInCollective:
	case o.AverageOver > 0:
		factor = 1 / float32(o.AverageOver)
	default:
		factor = 1 / float32(dpcp)
	}
	for _, bk := range b.Buckets {
		bk.GradientScalingFactor = factor
	}
	// Bucket groups: one per bucket, or one for all; the all-gather of
	// group i is followed by group i−1's (the layers run in the reverse of
	// the buffer's order).
	if o.DisableBucketing {
		d.groups = []*bucketGroup{newBucketGroup(d, 0, b.Buckets)}
	} else {
		for i, bk := range b.Buckets {
			d.groups = append(d.groups, newBucketGroup(d, i, []*Bucket{bk}))
		}
	}
	for i, g := range d.groups {
		g.rsOut, g.agIn = make([]comm.Buffer, len(g.buckets)), make([]comm.Buffer, len(g.buckets))
		if i > 0 {
			g.next = d.groups[i-1]
		}
		for p := range g.params {
			d.byParm[p] = g
		}
	}
	if cfg.OverlapGradReduce {
		for _, p := range params {
			g := d.byParm[p]
			p.AddGradHook(func(ctx context.Context, _ *autograd.Var) { g.registerGradReady(ctx, p) })
		}
	}
	return d, nil
}

// checkConfig refuses what the wrapper cannot do with cfg and o: the
// config's own rules (DDPConfig.Validate), a parameter type other than
// float32, bfloat16 and float16, the per-token loss with averaging in the
// collective (the reference's assert), and separate float32 local
// gradients with a float32 gradient buffer, where they would change
// nothing.
func checkConfig(cfg config.DDPConfig, o Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := checkDType("parameter type", o.ParamDType); err != nil {
		return err
	}
	if cfg.AverageInCollective && o.CalculatePerTokenLoss {
		return fmt.Errorf("dp: average_in_collective with calculate_per_token_loss: the per-token loss is normalised by the global token count, so the collective must sum; turn one off")
	}
	if n := len(cfg.ParamNamePatternsForFP32LocalAccumulation); n > 0 && !GradDTypeFor(o.ParamDType, cfg.GradReduceInFP32).IsHalf() {
		return fmt.Errorf("dp: param_name_patterns_for_fp32_local_accumulation has %d pattern(s), but the parameters are %v, so the gradient buffer is float32 and every gradient already accumulates in float32; leave it empty (it applies to --bf16 or --fp16 without grad_reduce_in_fp32)", n, o.ParamDType)
	}
	return nil
}

// Config returns the wrapper's DDP config.
func (d *DDP) Config() config.DDPConfig { return d.cfg }

// Parameters returns the wrapped parameters in registration order.
func (d *DDP) Parameters() []*nn.Parameter { return d.Buffer.Params }

// Group returns the group gradients are reduced (and, under the
// distributed optimizer, sharded) over; nil when that is one rank.
func (d *DDP) Group() comm.Group { return d.group }

// NumBucketGroups returns the number of bucket groups.
func (d *DDP) NumBucketGroups() int { return len(d.groups) }

// Shards returns this rank's shard of every bucket under the distributed
// optimizer (the ranges it owns the optimizer state of), and the number
// of shards.
func (d *DDP) Shards() ([]BucketShard, int, error) {
	s, err := d.Buffer.Layout.Shard(d.shards, d.shardRank)
	return s, d.shards, err
}

// NumBuckets returns the number of gradient buckets.
func (d *DDP) NumBuckets() int { return len(d.Buffer.Buckets) }

// OptimizerShards returns the pieces of this rank's shards under the
// distributed optimizer (Shards), each in its parameter's Value and Grad.
func (d *DDP) OptimizerShards() ([]ShardPiece, error) {
	shards, _, err := d.Shards()
	if err != nil {
		return nil, err
	}
	var out []ShardPiece
	for _, bs := range shards {
		for _, sp := range bs.Params {
			out = append(out, ShardPiece{Param: d.Buffer.Params[sp.Param], Offset: sp.ParamRange[0], Len: sp.ParamRange[1] - sp.ParamRange[0]})
		}
	}
	return out, nil
}

// StateBytes returns the buffer's bytes: the parameters, and the
// gradients with the float32 local gradients.
func (d *DDP) StateBytes() (params, grads int64) {
	grads = int64(d.Buffer.GradData.Bytes())
	for p := range d.Buffer.fp32Own {
		grads += int64(4 * p.Grad.Len())
	}
	return int64(d.Buffer.ParamData.Bytes()), grads
}

// GradOf returns p.Grad.
func (d *DDP) GradOf(p *nn.Parameter) *tensor.Tensor { return p.Grad }

// SetParam copies v into p's Value, a view of the buffer (rounded to
// nearest even for 16-bit parameters).
func (d *DDP) SetParam(p *nn.Parameter, v *tensor.Tensor) { p.Value.CopyFrom(v) }

// ParamPostHook returns y: the wrapper's parameters stay whole between
// passes.
func (d *DDP) ParamPostHook(_ context.Context, _ *autograd.Tape, _ []*nn.Parameter, y *autograd.Var) *autograd.Var {
	return y
}

// ZeroGradBuffer zeroes every gradient — the gradient buffer and the
// float32 local gradients — and prepares the bucket groups for the next
// iteration (zero_grad_buffer).
func (d *DDP) ZeroGradBuffer() {
	clearData(d.Buffer.GradData, d.workers)
	for _, b := range d.Buffer.Buckets {
		for _, p := range b.FP32GradParams {
			clear(p.Grad.Data())
		}
	}
	for _, bg := range d.groups {
		bg.reset()
	}
	d.reset()
}

// NoSync suspends gradient reduction until the returned function runs
// (no_sync): the gradients of the microbatches run inside only accumulate,
// and the grad hooks do not count them.
func (d *DDP) NoSync() (resume func()) {
	for _, g := range d.groups {
		g.lastMicrobatch = false
	}
	return func() {
		for _, g := range d.groups {
			g.lastMicrobatch = true
		}
	}
}

// StartGradSync launches every bucket group's reduction that has neither
// started nor finished this iteration (start_grad_sync, the schedules' grad_sync_func): asynchronous
// under overlap_grad_reduce, else finished before it returns.
func (d *DDP) StartGradSync(ctx context.Context) error {
	for _, g := range d.groups {
		if g.works != nil || g.gradFinished {
			continue
		}
		if err := g.startGradSync(ctx, false); err != nil {
			return err
		}
	}
	return nil
}

// FinishGradSync finishes every bucket group's reduction
// (finish_grad_sync): it waits for those in flight and runs the others.
// Afterwards every gradient (under the distributed optimizer: every
// gradient in this rank's shard) holds the data-parallel reduction.
func (d *DDP) FinishGradSync(ctx context.Context, forceAllReduce bool) error {
	if err := d.first(); err != nil {
		return err
	}
	for _, g := range d.groups {
		if err := g.finishGradSync(ctx, forceAllReduce); err != nil {
			return err
		}
	}
	return nil
}

// ScaleGradients multiplies every gradient by s (scale_gradients): g ← g·s
// in float32 for a float32 buffer and the float32 local gradients,
// g ← r(w(g)·s) for a 16-bit buffer.
func (d *DDP) ScaleGradients(s float32) {
	scaleData(d.Buffer.GradData, s, d.workers)
	for _, b := range d.Buffer.Buckets {
		for _, p := range b.FP32GradParams {
			scaleData(comm.F32(p.Grad.Data()), s, d.workers)
		}
	}
}

// StartParamSync all-gathers the updated parameter shards of every bucket
// (start_param_sync, distributed optimizer only): asynchronously under
// overlap_param_gather unless forceSync, which also finishes every
// all-gather in flight.
func (d *DDP) StartParamSync(ctx context.Context, forceSync bool) error {
	if !d.cfg.UseDistributedOptimizer {
		return nil
	}
	for _, g := range d.groups {
		if !forceSync && g.paramWorks != nil {
			continue
		}
		if err := g.startParamSync(ctx, forceSync); err != nil {
			return err
		}
	}
	return nil
}

// ParamsUpdated all-gathers the updated shards after the distributed
// optimizer's step, unless overlap_param_gather leaves that to the next
// forward pass (ParamPreHook).
func (d *DDP) ParamsUpdated(ctx context.Context) error {
	if d.cfg.OverlapParamGather {
		return nil
	}
	return d.StartParamSync(ctx, false)
}

// ParamPreHook is the forward pre-hook of overlap_param_gather: before a
// module uses ps, wait for the all-gathers of their bucket groups
// (launching them if nobody has) and prefetch the next group's, unless
// align_param_gather leaves that to the schedule. Without
// overlap_param_gather it does nothing.
func (d *DDP) ParamPreHook(ctx context.Context, ps []*nn.Parameter) error {
	if !d.cfg.OverlapParamGather {
		return nil
	}
	var last *bucketGroup
	for _, p := range ps {
		g := d.byParm[p]
		if g == nil || g == last {
			continue
		}
		last = g
		if err := g.finishParamSync(ctx, d.cfg.AlignParamGather); err != nil {
			return err
		}
	}
	return nil
}

// BroadcastParams copies every parameter from the group's rank 0 to the
// others (broadcast_params), in the parameter type, so all data-parallel
// replicas start equal.
func (d *DDP) BroadcastParams(ctx context.Context) error {
	for _, g := range []comm.Group{d.group, d.inter} {
		if g == nil || g.Size() == 1 {
			continue
		}
		if err := g.Broadcast(ctx, d.Buffer.ParamData, 0); err != nil {
			return fmt.Errorf("dp: parameter broadcast over %s: %w", g.Name(), err)
		}
	}
	return nil
}

// AllGatherGrads makes every gradient whole on every rank under the
// distributed optimizer, whose reduction leaves each rank only its shards
// reduced: each bucket's shards are all-gathered into the gradient
// buffer, in the gradient type, and widened into the float32 local
// gradients. For inspection (gradient dumps, tests); training does not
// need it. Without the distributed optimizer it does nothing.
func (d *DDP) AllGatherGrads(ctx context.Context) error {
	if !d.cfg.UseDistributedOptimizer || d.group == nil {
		return nil
	}
	for _, b := range d.Buffer.Buckets {
		in := cloneData(shardOf(b.GradData, d.shards, d.shardRank))
		if err := d.group.AllGather(ctx, b.GradData, in); err != nil {
			return fmt.Errorf("dp: gradient all-gather of bucket %d over %s: %w", b.ID, d.group.Name(), err)
		}
		d.Buffer.copyBackFP32Grads(b)
	}
	return nil
}
