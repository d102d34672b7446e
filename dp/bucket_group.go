package dp

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
)

// bucketGroup is a set of buckets reduced together (the reference's
// _ParamAndGradBucketGroup): one bucket normally, every bucket of a chunk
// whose bucketing is disabled.
//
// Gradient readiness. Under overlap_grad_reduce each parameter's grad hook
// counts, while the group is in its last microbatch (not under no_sync),
// how many times the parameter's gradient was completed. The first
// iteration only records the counts (they become the golden counts when the
// gradient buffer is next zeroed) and the reduction starts in
// finishGradSync; from the second iteration on the reduction starts, in
// the hook, the moment the counts equal the golden ones — that is, as soon
// as the bucket's last gradient is complete.
type bucketGroup struct {
	d       *DDP
	index   int
	buckets []*Bucket
	params  map[*nn.Parameter]bool

	counts, golden map[*nn.Parameter]int
	firstBatch     bool
	lastMicrobatch bool

	// Gradient reduction in flight: works, and per bucket the
	// reduce-scatter output (copied into the bucket's shard once done), in
	// the gradient type.
	works        []comm.Work
	scattered    bool // the reduction in flight reduce-scatters (else all-reduces)
	rsOut        []comm.Buffer
	gradFinished bool
	check        *gradCheck // the NaN/Inf and large-gradient check in flight

	// Parameter all-gather (distributed optimizer), in the parameter type.
	paramWorks      []comm.Work
	agIn            []comm.Buffer
	paramDispatched bool
	next            *bucketGroup // the group whose all-gather to prefetch after this one's
}

func newBucketGroup(d *DDP, index int, buckets []*Bucket) *bucketGroup {
	g := &bucketGroup{d: d, index: index, buckets: buckets, params: map[*nn.Parameter]bool{},
		counts: map[*nn.Parameter]int{}, firstBatch: true, lastMicrobatch: true}
	for _, b := range buckets {
		for _, p := range b.Params {
			g.params[p] = true
		}
	}
	return g
}

// reset prepares the group for the next iteration (zero_grad_buffer): the
// first iteration's counts become the golden counts.
func (g *bucketGroup) reset() {
	if g.firstBatch && len(g.counts) > 0 {
		g.golden = g.counts
		g.firstBatch = false
	}
	g.counts = map[*nn.Parameter]int{}
	g.lastMicrobatch = true
	g.gradFinished = false
}

// registerGradReady is the grad hook's part: count p's completed gradient
// in the last microbatch and start the reduction once every count equals
// its golden count.
func (g *bucketGroup) registerGradReady(ctx context.Context, p *nn.Parameter) {
	if !g.lastMicrobatch {
		return
	}
	g.counts[p]++
	if g.firstBatch || len(g.counts) != len(g.golden) || g.works != nil {
		return
	}
	for q, n := range g.golden {
		if g.counts[q] != n {
			return
		}
	}
	g.d.fail(g.startGradSync(ctx, false))
}

// startGradSync launches the group's reduction: round the float32 local
// gradients into the buffer (Bucket.FP32GradParams), check the gradients
// if asked, scale each bucket by its factor, then all-reduce each bucket,
// or under the distributed optimizer reduce-scatter it into this rank's
// shard (and, with several optimizer instances, all-reduce the shard
// across them). Every collective carries the gradient type; a 16-bit
// reduction accumulates in float32 in rank order and rounds once (comm's
// ReduceOp), and a 16-bit scaling is g ← r(w(g)·factor). Asynchronous
// under overlap_grad_reduce, else finished before it returns.
func (g *bucketGroup) startGradSync(ctx context.Context, forceAllReduce bool) error {
	d := g.d
	if g.firstBatch && g.works != nil {
		return nil // already started by finishGradSync's first-batch path
	}
	if g.works != nil {
		return fmt.Errorf("dp: bucket group %d: a gradient reduction is already in flight", g.index)
	}
	for _, b := range g.buckets {
		d.Buffer.copyInFP32Grads(b)
	}
	if d.cfg.CheckForNaNInGrad || d.cfg.CheckForLargeGrads {
		c, err := g.startCheck(ctx)
		if err != nil {
			return err
		}
		g.check = c
	}
	for _, b := range g.buckets {
		if b.GradientScalingFactor != 1 {
			scaleData(b.GradData, b.GradientScalingFactor, d.workers)
		}
	}
	op := comm.Sum
	if d.cfg.AverageInCollective {
		op = comm.Avg
	}
	async := d.cfg.OverlapGradReduce
	g.works = []comm.Work{} // non-nil: started
	scatter := d.cfg.UseDistributedOptimizer && !forceAllReduce
	g.scattered = scatter
	for i, b := range g.buckets {
		var w comm.Work
		var err error
		switch {
		case d.group == nil:
			continue
		case scatter && d.cfg.ReduceScatterWithFP32Accumulation:
			if err := g.allToAllReduce(ctx, i, b); err != nil {
				return fmt.Errorf("dp: gradient all-to-all of bucket %d over %s: %w", b.ID, d.group.Name(), err)
			}
			continue
		case scatter:
			g.rsOut[i] = ensureData(g.rsOut[i], d.Buffer.GradDType, b.GradData.Len()/d.shards)
			w, err = d.group.ReduceScatterAsync(ctx, g.rsOut[i], b.GradData, op)
		default:
			w, err = d.group.AllReduceAsync(ctx, b.GradData, op)
		}
		if err != nil {
			return fmt.Errorf("dp: gradient reduction of bucket %d over %s: %w", b.ID, d.group.Name(), err)
		}
		g.works = append(g.works, w)
	}
	if !async {
		return g.waitGradSync(ctx)
	}
	return nil
}

// waitGradSync waits for the group's reduction, puts reduce-scatter
// results in place, all-reduces the shards across optimizer instances (in
// the gradient type), widens the results back into the float32 local
// gradients, and reports a failed gradient check.
func (g *bucketGroup) waitGradSync(ctx context.Context) error {
	d := g.d
	var errs []error
	for _, w := range g.works {
		errs = append(errs, w.Wait(ctx))
	}
	g.works = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dp: gradient reduction of bucket group %d over %s: %w", g.index, d.group.Name(), err)
	}
	if g.scattered {
		op := comm.Sum
		if d.cfg.AverageInCollective {
			op = comm.Avg
		}
		for i, b := range g.buckets {
			shard := shardOf(b.GradData, d.shards, d.shardRank)
			switch {
			case d.group == nil: // the bucket is the shard
			case d.cfg.ReduceScatterWithFP32Accumulation:
				sumChunks(shard, g.rsOut[i], d.shards)
			default:
				shard.CopyFrom(g.rsOut[i])
			}
			if d.inter != nil {
				if err := d.inter.AllReduce(ctx, shard, op); err != nil {
					return fmt.Errorf("dp: all-reduce of bucket %d's shard across optimizer instances over %s: %w", b.ID, d.inter.Name(), err)
				}
			}
		}
	}
	for _, b := range g.buckets {
		d.Buffer.copyBackFP32Grads(b)
	}
	if g.check != nil {
		c := g.check
		g.check = nil
		return c.finish(ctx)
	}
	return nil
}

// allToAllReduce is the first half of
// reduce_scatter_with_fp32_accumulation: an all-to-all of the bucket, in
// the gradient type (16 bits on the wire for a 16-bit buffer), leaves
// chunk k of rsOut with rank k's values of this rank's shard, which
// waitGradSync sums in float32 in rank order and rounds once into the
// shard (sumChunks). The all-to-all has no asynchronous form in comm, so
// it runs when the bucket is ready, in the caller's goroutine.
func (g *bucketGroup) allToAllReduce(ctx context.Context, i int, b *Bucket) error {
	g.rsOut[i] = ensureData(g.rsOut[i], g.d.Buffer.GradDType, b.GradData.Len())
	return g.d.group.AllToAll(ctx, g.rsOut[i], b.GradData)
}

// finishGradSync waits for (or, without overlap or in the first
// iteration, runs) the group's reduction (finish_grad_sync).
func (g *bucketGroup) finishGradSync(ctx context.Context, forceAllReduce bool) error {
	d := g.d
	g.paramDispatched = false
	if !d.cfg.OverlapGradReduce {
		return g.startGradSync(ctx, forceAllReduce)
	}
	if g.gradFinished {
		return nil
	}
	if g.firstBatch && g.works == nil {
		if err := g.startGradSync(ctx, forceAllReduce); err != nil {
			return err
		}
	}
	if g.works == nil {
		return fmt.Errorf("dp: the gradient reduction of bucket group %d was never started (%d of %d parameters have their gradients): a parameter got fewer gradient contributions in the last microbatch than in the first iteration", g.index, len(g.counts), len(g.params))
	}
	err := g.waitGradSync(ctx)
	g.gradFinished = true
	return err
}

// startParamSync launches the all-gather of every bucket's updated shard
// (distributed optimizer), in the parameter type: asynchronous under
// overlap_param_gather unless forceSync, which also finishes one in
// flight.
func (g *bucketGroup) startParamSync(ctx context.Context, forceSync bool) error {
	d := g.d
	if forceSync && g.paramWorks != nil {
		return g.waitParamSync(ctx)
	}
	if g.paramWorks != nil {
		return fmt.Errorf("dp: bucket group %d: a parameter all-gather is already in flight", g.index)
	}
	g.paramDispatched = true
	if d.group == nil {
		return nil
	}
	g.paramWorks = []comm.Work{}
	for i, b := range g.buckets {
		g.agIn[i] = ensureData(g.agIn[i], d.Buffer.ParamDType, b.ParamData.Len()/d.shards)
		g.agIn[i].CopyFrom(shardOf(b.ParamData, d.shards, d.shardRank))
		w, err := d.group.AllGatherAsync(ctx, b.ParamData, g.agIn[i])
		if err != nil {
			return fmt.Errorf("dp: parameter all-gather of bucket %d over %s: %w", b.ID, d.group.Name(), err)
		}
		g.paramWorks = append(g.paramWorks, w)
	}
	if !d.cfg.OverlapParamGather || forceSync {
		return g.waitParamSync(ctx)
	}
	return nil
}

func (g *bucketGroup) waitParamSync(ctx context.Context) error {
	var errs []error
	for _, w := range g.paramWorks {
		errs = append(errs, w.Wait(ctx))
	}
	g.paramWorks = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dp: parameter all-gather of bucket group %d over %s: %w", g.index, g.d.group.Name(), err)
	}
	return nil
}

// finishParamSync is the forward pre-hook's part (finish_param_sync):
// launch the all-gather if nobody has, wait for it, then prefetch the next
// group's unless the schedule launches them (align_param_gather).
func (g *bucketGroup) finishParamSync(ctx context.Context, skipNext bool) error {
	if !g.paramDispatched {
		if err := g.startParamSync(ctx, false); err != nil {
			return err
		}
	}
	if g.paramWorks == nil {
		return nil
	}
	if err := g.waitParamSync(ctx); err != nil {
		return err
	}
	if g.next != nil && !skipNext && !g.next.paramDispatched {
		return g.next.startParamSync(ctx, false)
	}
	return nil
}
