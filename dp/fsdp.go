package dp

import (
	"context"
	"fmt"
	"slices"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// FSDPOptions are what NewFSDP needs beyond the parameters and the config.
type FSDPOptions struct {
	// Group is the group the state is sharded over: the data-parallel
	// ranks (dp·cp), or under hybrid sharding (HSDP,
	// num_distributed_optimizer_instances > 1) the ranks of this rank's
	// instance. Nil for a single rank.
	Group comm.Group
	// Outer is the group of the ranks holding the same shards in the
	// other instances under HSDP (outer_dp_sharding_strategy no_shard):
	// the gradient shards are all-reduced over it once an iteration's
	// reductions are done. Nil or size 1 without HSDP.
	Outer comm.Group
	// (Under HFSDP, outer_dp_sharding_strategy optim, each shard is cut
	// again into one piece per instance, and this rank's optimizer keeps
	// only its piece; the updated pieces are all-gathered over Outer.)
	// Units are the FSDP units, in the order a forward pass reaches them:
	// each a set of parameters gathered, used and released together (the
	// reference's fsdp_unit_modules, a decoder layer each). The
	// parameters in no unit (the embeddings, the final norm and output
	// layer: the reference's non-unit modules) form one more group that
	// stays whole between passes.
	Units [][]*nn.Parameter
	// SharedEmbedding is the word embedding when it is tied across
	// pipeline stages, else nil: a group of its own (staying whole), so
	// that the first and the last stage's shards of it line up for the
	// embedding group's all-reduce, as the distributed optimizer gives it
	// a bucket of its own.
	SharedEmbedding *nn.Parameter
	// CalculatePerTokenLoss is the model config's calculate_per_token_loss:
	// gradients are summed, not averaged (FinalizeModelGrads scales them).
	CalculatePerTokenLoss bool
	// AverageOver is the number of replicas the gradients are averaged
	// over when it differs from the group's size (0: the group's): the
	// experts' FSDP shards over the expert data-parallel group but averages
	// over the dense dp·cp replicas (Options.AverageOver).
	AverageOver int
	// ParamDType is the type the parameters are stored and gathered in:
	// Float32, or BFloat16 / Float16 under --bf16 / --fp16.
	ParamDType tensor.DType
	// Workers is the number of goroutines the buffer-wide loops may use.
	Workers int
}

// FSDP is Megatron-FSDP's owner of a model chunk's state under the
// gradient-sharding strategies (DataParallelShardingStrategy optim_grads,
// ZeRO-2, and optim_grads_params, ZeRO-3): each unit's parameters are one
// flat buffer (FSDPLayout), padded to a multiple of lcm(shards, 128) and
// cut into equal shards over the group; rank r keeps shard r of every
// unit's parameters (the optimizer's, rounded into the parameters' type)
// and of its gradient (in float32), and the optimizer updates only those
// (under HFSDP only its instance's piece of them). Under hybrid sharding
// the gradient shards are all-reduced across the instances (Outer).
//
// Gradients. A unit's ParamPostHook puts an autograd function behind the
// part of the pass that used the unit; its backward gives the unit's
// parameters zeroed whole gradients (in the gradient type). Once backward
// has completed every one of them (their grad hooks) for every pass that
// prepared them (autograd.Ctx.Pass: a split backward's weight gradients
// land after the next pass began), the unit is scaled
// by 1/dp (or averaged in the collective, or summed for the per-token
// loss), reduce-scattered in the gradient type, added into the float32
// shard, and the whole gradients dropped — after every micro-batch, so
// that between passes a rank holds 1/dp of the gradients.
//
// Parameters. Under optim_grads every parameter stays whole, all-gathered
// from the shards after each optimizer step (StartParamSync). Under
// optim_grads_params a unit's parameters are whole only while a pass uses
// them: ParamPreHook all-gathers them (or waits for the gather prefetched
// when the previous unit was gathered) and ParamPostHook releases them
// (tensor.Tensor.Release: the tape's saved views see the release too);
// the backward function gathers them again before the unit's backward and
// releases them once its gradients are reduced. The parameters in no unit
// stay whole, as under optim_grads. suggested_communication_unit_size
// sizes the prefetch: the units after the one gathered (before it, in
// backward) until half of it is in flight, at least one unit.
//
// The whole buffers (gathers and gradients) are kept for reuse once
// released (bufPool); Memory reports the state and the high-water marks.
type FSDP struct {
	cfg     config.DDPConfig
	group   comm.Group // nil for one rank
	outer   comm.Group // HSDP's replicas of the shards, or nil
	hfsdp   bool       // outer_dp_sharding_strategy optim: the optimizer's pieces split across outer
	shards  int
	rank    int
	units   []*fsdpUnit
	byParam map[*nn.Parameter]*fsdpUnit
	pos     map[*nn.Parameter]int // a parameter's place in a forward pass (fsdpGroups)
	params  []*nn.Parameter

	paramDType, gradDType tensor.DType
	op                    comm.ReduceOp
	factor                float32 // applied before the reduce-scatter
	prefetch              int     // elements gathered ahead
	reduceCap             int     // elements of gradients reduced in flight
	inflight              []*fsdpUnit
	workers               int

	mem     struct{ params, grads highWater } // gathered parameters and whole gradients
	pool    bufPool                           // released whole buffers, for reuse
	hookErr                                   // the first failure in a grad hook
	badGrad string                            // the first non-finite gradient found this iteration
}

// NewFSDP lays out params (one model chunk's, in registration order) in
// units as o says, keeps this rank's shards of their values and gradients,
// replaces each parameter's Value by a view of the unit's whole buffer
// (released at once under optim_grads_params) and installs the grad
// hooks. cfg must shard gradients (ShardsGradients).
func NewFSDP(params []*nn.Parameter, cfg config.DDPConfig, o FSDPOptions) (*FSDP, error) {
	if err := checkFSDPConfig(cfg, o); err != nil {
		return nil, err
	}
	f := &FSDP{cfg: cfg, shards: 1, byParam: map[*nn.Parameter]*fsdpUnit{}, params: params, pool: bufPool{},
		paramDType: o.ParamDType, gradDType: GradDTypeFor(o.ParamDType, cfg.GradReduceInFP32),
		op: comm.Sum, factor: 1, workers: o.Workers}
	if o.Group != nil && o.Group.Size() > 1 {
		f.group, f.shards, f.rank = o.Group, o.Group.Size(), o.Group.Rank()
	}
	replicas := f.shards
	if o.Outer != nil && o.Outer.Size() > 1 {
		f.outer = o.Outer
		f.hfsdp = cfg.HybridShardsOptimizer()
		replicas *= o.Outer.Size()
	}
	switch over := o.AverageOver; {
	case o.CalculatePerTokenLoss:
	case cfg.AverageInCollective && over > 0:
		f.op, f.factor = comm.Avg, float32(f.shards)/float32(over)
	case cfg.AverageInCollective:
		f.op = comm.Avg
	case over > 0:
		f.factor = 1 / float32(over)
	default:
		f.factor = 1 / float32(replicas)
	}
	groups, pos, err := fsdpGroups(params, o.Units, o.SharedEmbedding)
	if err != nil {
		return nil, err
	}
	f.pos = pos
	lps := make([][]LayoutParam, len(groups))
	for i, g := range groups {
		for _, p := range g {
			lps[i] = append(lps[i], LayoutParam{Name: p.Name, Numel: p.Value.Len(), SharedEmbedding: p == o.SharedEmbedding})
		}
	}
	l := FSDPLayout(lps, f.shards, f.pieces(), cfg.PadBucketsForHighNCCLBusBW)
	for i, g := range groups {
		preserve := !cfg.ShardsParameters() || i >= len(o.Units)
		u := f.newUnit(i, g, l, preserve)
		f.units = append(f.units, u)
		for _, p := range g {
			f.byParam[p] = u
		}
	}
	f.sizeCommunication()
	for _, p := range params {
		p.AddGradHook(func(ctx context.Context, _ *autograd.Var) { f.gradReady(ctx, p) })
	}
	return f, nil
}

// FSDPShards returns how Megatron-FSDP shards a unit over dpcp
// data-parallel ranks: over the inner ranks of an instance (dpcp /
// num_distributed_optimizer_instances), whose shards the optimizer
// splits again into outer pieces across the instances under HFSDP
// (outer_dp_sharding_strategy optim; outer is 1 otherwise).
func FSDPShards(cfg config.DDPConfig, dpcp int) (inner, outer int) {
	n := max(cfg.NumDistributedOptimizerInstances, 1)
	if cfg.HybridShardsOptimizer() {
		return dpcp / n, n
	}
	return dpcp / n, 1
}

// pieces is the number of pieces the optimizer cuts each shard into
// across instances: their number under HFSDP, else 1.
func (f *FSDP) pieces() int {
	if f.hfsdp {
		return f.outer.Size()
	}
	return 1
}

// checkFSDPConfig refuses what NewFSDP cannot do with cfg and o.
func checkFSDPConfig(cfg config.DDPConfig, o FSDPOptions) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if !cfg.ShardsGradients() {
		return fmt.Errorf("dp: FSDP needs use_megatron_fsdp with data_parallel_sharding_strategy optim_grads or optim_grads_params, not %q (the others are DDP's: New)", cfg.DataParallelShardingStrategy)
	}
	if cfg.AverageInCollective && o.CalculatePerTokenLoss {
		return fmt.Errorf("dp: average_in_collective with calculate_per_token_loss: the per-token loss is normalised by the global token count, so the collective must sum; turn one off")
	}
	if cfg.CheckForLargeGrads {
		return fmt.Errorf("dp: check_for_large_grads is not built for Megatron-FSDP's sharded gradients yet (issue 29): turn it off")
	}
	return checkDType("parameter type", o.ParamDType)
}

// fsdpGroups returns the units, each checked to hold parameters of params
// once, then the shared embedding (if any) alone, then (if any) the
// parameters in no unit; every group in registration order (the order of
// params), as the reference's buffers follow named_parameters. pos is
// each parameter's place in a forward pass (the prefetch reads it): unit
// i's at i+1, the others at 0 when registered before the units' (the
// embeddings), else at len(units)+1 (the final norm, the output layer).
func fsdpGroups(params []*nn.Parameter, units [][]*nn.Parameter, shared *nn.Parameter) (groups [][]*nn.Parameter, pos map[*nn.Parameter]int, err error) {
	owner := make(map[*nn.Parameter]int, len(params))
	order := make(map[*nn.Parameter]int, len(params))
	for i, p := range params {
		owner[p], order[p] = -1, i
	}
	first := len(params) // the first registered parameter of a unit
	pos = make(map[*nn.Parameter]int, len(params))
	for i, u := range units {
		if len(u) == 0 {
			return nil, nil, fmt.Errorf("dp: FSDP unit %d has no parameters", i)
		}
		for _, p := range u {
			switch j, ok := owner[p]; {
			case !ok:
				return nil, nil, fmt.Errorf("dp: FSDP unit %d holds %s, which is not among the wrapped parameters", i, p.Name)
			case j >= 0:
				return nil, nil, fmt.Errorf("dp: %s is in FSDP units %d and %d: a parameter belongs to one unit", p.Name, j, i)
			}
			owner[p], pos[p], first = i, i+1, min(first, order[p])
		}
		g := slices.Clone(u)
		slices.SortFunc(g, func(a, b *nn.Parameter) int { return order[a] - order[b] })
		groups = append(groups, g)
	}
	for _, p := range params {
		switch {
		case owner[p] >= 0:
		case order[p] > first:
			pos[p] = len(units) + 1
		default:
			pos[p] = 0
		}
	}
	if shared != nil {
		switch j, ok := owner[shared]; {
		case !ok:
			return nil, nil, fmt.Errorf("dp: the shared embedding %s is not among the wrapped parameters", shared.Name)
		case j >= 0:
			return nil, nil, fmt.Errorf("dp: the shared embedding %s is in FSDP unit %d: it belongs to none", shared.Name, j)
		}
		owner[shared] = len(units)
		groups = append(groups, []*nn.Parameter{shared})
	}
	var rest []*nn.Parameter
	for _, p := range params {
		if owner[p] < 0 {
			rest = append(rest, p)
		}
	}
	if len(rest) > 0 {
		groups = append(groups, rest)
	}
	return groups, pos, nil
}

// sizeCommunication sets the prefetch and the cap on gradients in flight
// from suggested_communication_unit_size, or from twice the average unit
// when it is unset.
func (f *FSDP) sizeCommunication() {
	total := 0
	for _, u := range f.units {
		total += u.numel
	}
	size := int(FSDPCommunicationUnit(f.cfg, float64(total)/float64(max(len(f.units), 1))))
	f.prefetch, f.reduceCap = size/2, size
}

// FSDPCommunicationUnit is Megatron-FSDP's communication unit in
// elements for units of avgUnit elements on average:
// suggested_communication_unit_size, else twice the average unit. The
// prefetch runs until half of it is ahead, and at most that many
// gradient elements are reduced in flight (the memory model, package
// plan, counts what that holds whole).
func FSDPCommunicationUnit(cfg config.DDPConfig, avgUnit float64) float64 {
	if n := cfg.SuggestedCommunicationUnitSize; n > 0 {
		return float64(n)
	}
	return 2 * avgUnit
}

// Config returns the wrapper's DDP config.
func (f *FSDP) Config() config.DDPConfig { return f.cfg }

// Parameters returns the wrapped parameters in registration order.
func (f *FSDP) Parameters() []*nn.Parameter { return f.params }

// NumBuckets returns the number of units, the group of parameters in no
// unit included.
func (f *FSDP) NumBuckets() int { return len(f.units) }

// Units describes the units: for each, its parameters' names, its padded
// size and this rank's shard of it [Lo, Hi), and whether it stays whole
// between passes.
func (f *FSDP) Units() []FSDPUnit {
	out := make([]FSDPUnit, len(f.units))
	for i, u := range f.units {
		names := make([]string, len(u.params))
		for k, p := range u.params {
			names[k] = p.Name
		}
		out[i] = FSDPUnit{Params: names, Numel: u.numel, Unpadded: u.unpadded, Lo: u.lo, Hi: u.lo + u.shardLen(), Whole: u.preserve}
	}
	return out
}

// FSDPUnit describes one unit of an FSDP (FSDP.Units).
type FSDPUnit struct {
	Params          []string
	Numel, Unpadded int
	Lo, Hi          int
	Whole           bool
}

// OptimizerShards returns this rank's pieces of every unit's parameters,
// each with its elements of the unit's parameter and gradient shards.
func (f *FSDP) OptimizerShards() ([]ShardPiece, error) {
	var out []ShardPiece
	for _, u := range f.units {
		lo, hi := u.optimizerRange()
		for k, p := range u.params {
			r := u.ranges[k]
			a, b := max(r.Start, lo), min(r.End, hi)
			if a >= b {
				continue
			}
			out = append(out, ShardPiece{Param: p, Offset: a - r.Start, Len: b - a,
				Model: u.paramShard.Slice(a-u.lo, b-u.lo), Grad: comm.F32(u.gradShard[a-u.lo : b-u.lo])})
		}
	}
	return out, nil
}

// GradOf returns p's elements of this rank's gradient shard (a view), or
// nil when the shard holds none of p.
func (f *FSDP) GradOf(p *nn.Parameter) *tensor.Tensor {
	u := f.byParam[p]
	r := u.ranges[slices.Index(u.params, p)]
	lo, hi := u.lo, u.lo+u.shardLen()
	a, b := max(r.Start, lo), min(r.End, hi)
	if a >= b {
		return nil
	}
	return tensor.FromSlice(u.gradShard[a-lo:b-lo], b-a)
}

// SetParam sets p's whole value to v: its elements in this rank's shard
// (rounded to nearest even for 16-bit parameters) and, where the unit
// stays whole, p's Value.
func (f *FSDP) SetParam(p *nn.Parameter, v *tensor.Tensor) {
	u := f.byParam[p]
	r := u.ranges[slices.Index(u.params, p)]
	lo, hi := u.lo, u.lo+u.shardLen()
	if a, b := max(r.Start, lo), min(r.End, hi); a < b {
		src := v.Contiguous().View(v.Len()).Narrow(0, a-r.Start, b-a)
		viewOf(u.paramShard, a-lo, b-lo, []int{b - a}).CopyFrom(src)
	}
	if u.bound {
		p.Value.CopyFrom(v)
	}
}

// BroadcastParams copies every parameter from the group's rank 0 (and,
// under hybrid sharding, from the first instance) into every rank's copy
// and shard: the units that stay whole, which rank 0 holds whole. A unit
// released between passes keeps only each rank's own shard of the values
// it was built from, so rank 0 no longer has the rest: broadcast the
// model before wrapping it (an error says so; training builds every
// replica from the same seed instead).
func (f *FSDP) BroadcastParams(ctx context.Context) error {
	for _, u := range f.units {
		if !u.preserve {
			return fmt.Errorf("dp: FSDP's unit %d keeps only this rank's shard of its parameters (optim_grads_params): broadcast the model's parameters before wrapping it", u.index)
		}
	}
	for _, u := range f.units {
		if f.group != nil {
			if err := f.group.Broadcast(ctx, u.full, 0); err != nil {
				return fmt.Errorf("dp: FSDP parameter broadcast of unit %d over %s: %w", u.index, f.group.Name(), err)
			}
		}
		if f.outer != nil {
			if err := f.outer.Broadcast(ctx, u.full, 0); err != nil {
				return fmt.Errorf("dp: FSDP parameter broadcast of unit %d over %s: %w", u.index, f.outer.Name(), err)
			}
		}
	}
	return nil
}

// AllGatherGrads gives every parameter a whole float32 Grad on every
// rank, gathered from the reduced shards, until the next ZeroGradBuffer.
// For inspection (gradient dumps, tests); training does not need it.
func (f *FSDP) AllGatherGrads(ctx context.Context) error {
	for _, u := range f.units {
		whole := newData(tensor.Float32, u.numel)
		if f.group == nil {
			whole.CopyFrom(comm.F32(u.gradShard))
		} else if err := f.group.AllGather(ctx, whole, comm.F32(u.gradShard)); err != nil {
			return fmt.Errorf("dp: FSDP gradient all-gather of unit %d over %s: %w", u.index, f.group.Name(), err)
		}
		for k, p := range u.params {
			r := u.ranges[k]
			p.Grad = viewOf(whole, r.Start, r.End, p.Value.Shape())
		}
	}
	return nil
}

// FSDPMemory is what an FSDP holds, in bytes: the state it keeps between
// passes (the shards, and the whole parameters that stay whole) and the
// most it held at once in gathered parameters and whole gradients.
type FSDPMemory struct {
	// ParamShards, GradShards and Whole are kept between passes: the
	// parameter shards of the released units (the parameters' type), the
	// float32 gradient shards, and the parameters that stay whole (whose
	// shards are slices of them).
	ParamShards, GradShards, Whole int64
	// PeakGathered and PeakGrads are the high-water marks of the
	// gathered units' parameters and of the whole gradients.
	PeakGathered, PeakGrads int64
}

// Memory reports what f holds (FSDPMemory).
func (f *FSDP) Memory() FSDPMemory {
	m := FSDPMemory{PeakGathered: f.mem.params.peak, PeakGrads: f.mem.grads.peak}
	for _, u := range f.units {
		m.GradShards += int64(4 * len(u.gradShard))
		if u.preserve {
			m.Whole += int64(u.full.Bytes()) // the shard is a slice of it
		} else {
			m.ParamShards += int64(u.paramShard.Bytes())
		}
	}
	return m
}

// StateBytes returns the shards, the parameters that stay whole and the
// peaks of what passes gathered (FSDPMemory).
func (f *FSDP) StateBytes() (params, grads int64) {
	m := f.Memory()
	return m.ParamShards + m.Whole + m.PeakGathered, m.GradShards + m.PeakGrads
}

// highWater counts bytes held and their most.
type highWater struct{ now, peak int64 }

// add changes what is held by n bytes.
func (h *highWater) add(n int) {
	h.now += int64(n)
	h.peak = max(h.peak, h.now)
}
