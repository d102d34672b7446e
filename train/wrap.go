package train

import (
	"context"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/optim"
)

// wrapChunks wraps every model chunk in the data-parallel wrapper — its
// parameters and gradients moved into buffers, in registration order,
// bucketed as the DDP config and the chunk's place say — and builds the
// optimizer: Adam over whole parameters, or the distributed optimizer over
// this rank's shards of the buffers.
func (t *trainer) wrapChunks(ctx context.Context, workers int) error {
	a := t.a
	ddp := a.DDP
	intra, inter := t.dpg, comm.Group(nil)
	if ddp.NumDistributedOptimizerInstances > 1 {
		intra, inter = t.groups.Get(mesh.GroupIntraDPCP), t.groups.Get(mesh.GroupInterDistOpt)
	}
	var err error
	for i, c := range t.chunks {
		ps := c.RegisteredParameters()
		n := 0
		for _, p := range ps {
			n += p.Value.Len()
		}
		var shared *nn.Parameter
		if t.pp.Size() > 1 && c.WordEmbeddings != nil && a.Model.ShareEmbeddingsAndOutputWeights {
			shared = c.WordEmbeddings
		}
		d, err := dp.New(ctx, ps, ddp, dp.Options{
			Group: intra, Inter: inter,
			BucketSize:       dp.BucketSize(ddp, t.dpg.Size(), n, t.pp.Rank(), i),
			DisableBucketing: i > 0, SharedEmbedding: shared,
			CalculatePerTokenLoss: a.Model.CalculatePerTokenLoss,
			ParamDType:            a.ParamDType(),
		})
		if err != nil {
			return err
		}
		d.Workers = workers
		if ddp.OverlapParamGather {
			c.PreHook = func(ps []*nn.Parameter) error { return d.ParamPreHook(ctx, ps) }
		}
		t.ddps = append(t.ddps, d)
		t.params = append(t.params, c.Parameters()...)
	}
	cfg := optim.AdamConfig{
		Beta1: float32(a.AdamBeta1), Beta2: float32(a.AdamBeta2), Eps: float32(a.AdamEps),
		WeightDecay: float32(a.WeightDecay), Decoupled: true,
	}
	if t.scaler, err = a.newScaler(); err != nil {
		return err
	}
	if !ddp.UseDistributedOptimizer {
		t.opt = optim.NewAdam(t.params, cfg)
		t.opt.Workers = workers
		return nil
	}
	dopt, err := optim.NewDistributedOptimizer(t.ddps, cfg, t.groups.Get(mesh.GroupIntraDistOpt), t.normOwned())
	if err != nil {
		return err
	}
	t.dopt, t.opt = dopt, dopt.Adam
	t.opt.Workers = workers
	return nil
}
