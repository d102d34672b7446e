package train

import (
	"context"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/optim"
)

// wrapChunks wraps every model chunk in the data-parallel wrapper — its
// parameters and gradients moved into buffers, in registration order,
// bucketed as the DDP config and the chunk's place say; a MoE chunk's
// expert parameters (not all-reduced) in a second wrapper of their own,
// reduced over the expert data-parallel group — and builds the
// optimizer: Adam over whole parameters, or the distributed optimizer over
// this rank's shards of the buffers.
func (t *trainer) wrapChunks(ctx context.Context, workers int) error {
	a := t.a
	ddp := a.DDP
	intra, inter := t.dpg, comm.Group(nil)
	eintra := t.groups.Get(mesh.GroupExptDP)
	if ddp.NumDistributedOptimizerInstances > 1 {
		intra, inter = t.groups.Get(mesh.GroupIntraDPCP), t.groups.Get(mesh.GroupInterDistOpt)
		eintra = t.groups.Get(mesh.GroupIntraExptDP)
	}
	for i, c := range t.chunks {
		var dense, experts []*nn.Parameter
		for _, p := range c.RegisteredParameters() {
			if p.Allreduce {
				dense = append(dense, p)
			} else {
				experts = append(experts, p)
			}
		}
		var shared *nn.Parameter
		if c.WordEmbeddings != nil && a.Model.WordEmbeddingShared() {
			shared = c.WordEmbeddings
		}
		var d dp.Wrapper
		var err error
		if ddp.ShardsGradients() {
			d, err = t.wrapFSDP(dense, c.FSDPUnits(), fsdpShape{group: intra, outer: inter, shared: shared}, workers)
		} else {
			d, err = t.wrap(dense, dp.Options{Group: intra, Inter: inter, DisableBucketing: i > 0, SharedEmbedding: shared}, i, workers)
		}
		if err != nil {
			return err
		}
		t.ddps = append(t.ddps, d)
		var e dp.Wrapper
		switch {
		case len(experts) == 0:
		case ddp.ShardsGradients():
			e, err = t.wrapFSDP(experts, c.FSDPUnits(), fsdpShape{group: eintra, averageOver: t.dpg.Size()}, workers)
		default:
			e, err = t.wrap(experts, dp.Options{Group: eintra, Inter: inter, DisableBucketing: i > 0, AverageOver: t.dpg.Size()}, i, workers)
		}
		if err != nil {
			return err
		}
		t.expertDDPs = append(t.expertDDPs, e)
		t.params = append(t.params, c.Parameters()...)
	}
	var err error
	cfg := optim.AdamConfig{
		Beta1: float32(a.AdamBeta1), Beta2: float32(a.AdamBeta2), Eps: float32(a.AdamEps),
		Decoupled: true, Workers: workers, SGD: a.Optimizer == "sgd", Momentum: float32(a.SGDMomentum),
	}
	o := optim.Options{FoundInf: t.groups.World, ClipGrad: a.ClipGrad, Norm: t.normParts()}
	if o.Scaler, err = a.newScaler(); err != nil {
		return err
	}
	if !ddp.UseDistributedOptimizer {
		t.opt = optim.NewPlain(t.params, cfg, o)
		return nil
	}
	t.opt, err = optim.NewDistributed(t.allDDPs(), cfg, o)
	return err
}

// paramPreHook returns the forward pre-hook of model chunk i for a pass
// under ctx (gpt.Inputs.PreHook): the chunk's wrappers' ParamPreHook on
// the parameters a part of the pass is about to use (under
// overlap_param_gather or Megatron-FSDP; otherwise none).
func (t *trainer) paramPreHook(ctx context.Context, i int) func([]*nn.Parameter) error {
	if !t.a.DDP.OverlapParamGather && !t.a.DDP.ShardsGradients() {
		return nil
	}
	return func(ps []*nn.Parameter) error {
		for _, w := range t.chunkDDPs(i) {
			if err := w.ParamPreHook(ctx, ps); err != nil {
				return err
			}
		}
		return nil
	}
}

// paramPostHook returns the forward post-hook of model chunk i for a pass
// under ctx (gpt.Inputs.PostHook): the chunk's wrappers' ParamPostHook
// under Megatron-FSDP's sharded strategies; otherwise none.
func (t *trainer) paramPostHook(ctx context.Context, tape *autograd.Tape, i int) func([]*nn.Parameter, *autograd.Var) *autograd.Var {
	if !t.a.DDP.ShardsGradients() {
		return nil
	}
	return func(ps []*nn.Parameter, y *autograd.Var) *autograd.Var {
		for _, w := range t.chunkDDPs(i) {
			y = w.ParamPostHook(ctx, tape, ps, y)
		}
		return y
	}
}

// normParts says how the global gradient norm is summed: under the
// distributed optimizer the squares of every rank's shards over the
// optimizer instance; else the dense parameters' squares over the
// model-parallel group (tp × pp) plus, in a MoE model, the experts' over
// the expert model-parallel group (etp × ep × pp), where each expert's
// weights live once. Parameters another rank or chunk also holds count
// once (normOwned).
func (t *trainer) normParts() []optim.NormPart {
	owned := t.normOwned()
	switch {
	case t.a.DDP.HybridShardsOptimizer():
		// HFSDP: an instance holds only its pieces of the optimizer state.
		return []optim.NormPart{{Group: t.groups.World, Counts: owned}}
	case t.a.DDP.UseDistributedOptimizer:
		return []optim.NormPart{{Group: t.groups.Get(mesh.GroupIntraDistOpt), Counts: owned}}
	case t.a.Model.NumMoEExperts == 0: // (a collective: decided by the config, not by the rank's layers)
		return []optim.NormPart{{Group: t.mp, Counts: owned}}
	}
	return []optim.NormPart{
		{Group: t.mp, Counts: func(p *nn.Parameter) bool { return p.Allreduce && owned(p) }},
		{Group: t.groups.Get(mesh.GroupTPEPPP), Counts: func(p *nn.Parameter) bool { return !p.Allreduce && owned(p) }},
	}
}

// wrap builds chunk i's data-parallel wrapper of params with o's groups
// and the run's DDP config, precision and bucket size.
func (t *trainer) wrap(params []*nn.Parameter, o dp.Options, i, workers int) (dp.Wrapper, error) {
	a := t.a
	n := 0
	for _, p := range params {
		n += p.Value.Len()
	}
	o.BucketSize = dp.BucketSize(a.DDP, t.dpg.Size(), n, t.pp.Rank(), i)
	o.CalculatePerTokenLoss = a.Model.CalculatePerTokenLoss
	o.ParamDType = a.ParamDType()
	o.Workers = workers
	return dp.New(params, a.DDP, o)
}

// fsdpShape is where a chunk's Megatron-FSDP wrapper shards: the group,
// under HSDP the group of the other instances, the replicas its
// gradients are averaged over when they are not the group's (0), and the
// word embedding tied across pipeline stages (nil if none), which gets a
// group of its own.
type fsdpShape struct {
	group, outer comm.Group // outer: HSDP's other instances, or nil
	averageOver  int
	shared       *nn.Parameter
}

// wrapFSDP builds a chunk's Megatron-FSDP wrapper of params shaped as s,
// its units the chunk's (gpt.Model.FSDPUnits) among params: the dense
// parameters over dp·cp, or a MoE chunk's experts over the expert
// data-parallel group.
func (t *trainer) wrapFSDP(params []*nn.Parameter, units [][]*nn.Parameter, s fsdpShape, workers int) (dp.Wrapper, error) {
	in := map[*nn.Parameter]bool{}
	for _, p := range params {
		in[p] = true
	}
	var mine [][]*nn.Parameter
	for _, u := range units {
		var keep []*nn.Parameter
		for _, p := range u {
			if in[p] {
				keep = append(keep, p)
			}
		}
		if len(keep) > 0 {
			mine = append(mine, keep)
		}
	}
	return dp.NewFSDP(params, t.a.DDP, dp.FSDPOptions{Group: s.group, Outer: s.outer, Units: mine, SharedEmbedding: s.shared, AverageOver: s.averageOver,
		CalculatePerTokenLoss: t.a.Model.CalculatePerTokenLoss, ParamDType: t.a.ParamDType(), Workers: workers})
}

// allDDPs returns every data-parallel wrapper of the rank: each chunk's
// dense one, then each MoE chunk's expert one.
func (t *trainer) allDDPs() []dp.Wrapper {
	out := append([]dp.Wrapper(nil), t.ddps...)
	for _, e := range t.expertDDPs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// chunkDDPs returns chunk i's wrappers: the dense one and, in a MoE
// chunk, the expert one.
func (t *trainer) chunkDDPs(i int) []dp.Wrapper {
	if e := t.expertDDPs[i]; e != nil {
		return []dp.Wrapper{t.ddps[i], e}
	}
	return t.ddps[i : i+1]
}
