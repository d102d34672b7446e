package dp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// unitsOf returns the units holding ps, each once, in unit order.
func (f *FSDP) unitsOf(ps []*nn.Parameter) []*fsdpUnit {
	var out []*fsdpUnit
	for _, p := range ps {
		if u := f.byParam[p]; u != nil && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *fsdpUnit) int { return a.index - b.index })
	return out
}

// ParamPreHook makes the units holding ps whole for the part of the
// forward pass about to use them, then prefetches the units after them.
func (f *FSDP) ParamPreHook(ctx context.Context, ps []*nn.Parameter) error {
	us := f.unitsOf(ps)
	for _, u := range us {
		if err := u.acquire(ctx); err != nil {
			return err
		}
	}
	if len(us) == 0 {
		return nil
	}
	return f.prefetchFrom(ctx, f.lastPos(ps), +1)
}

// lastPos is where the part of a pass using ps stands: the latest place
// of its parameters (fsdpGroups), so that the head, which also uses the
// tied embedding registered first, stands after the layers.
func (f *FSDP) lastPos(ps []*nn.Parameter) int {
	p := -1
	for _, q := range ps {
		if n, ok := f.pos[q]; ok {
			p = max(p, n)
		}
	}
	return p
}

// prefetchFrom issues the gathers of the released units placed after pos
// in a forward pass (dir +1) or before it (dir −1), nearest first, until
// f.prefetch elements are whole or in flight ahead, at least one unit.
func (f *FSDP) prefetchFrom(ctx context.Context, pos, dir int) error {
	budget := f.prefetch
	for k := range f.units {
		u := f.units[k]
		if dir < 0 {
			u = f.units[len(f.units)-1-k]
		}
		if u.preserve || (u.index+1-pos)*dir <= 0 { // unit i stands at i+1
			continue
		}
		if err := u.startGather(ctx); err != nil {
			return err
		}
		if budget -= u.numel; budget <= 0 {
			break
		}
	}
	return nil
}

// ParamPostHook releases the units holding ps after the part of the
// forward pass that used them and, when the pass records for backward,
// returns y behind an fsdpBackward that prepares them for the part's
// backward.
func (f *FSDP) ParamPostHook(_ context.Context, t *autograd.Tape, ps []*nn.Parameter, y *autograd.Var) *autograd.Var {
	us := f.unitsOf(ps)
	for _, u := range us {
		u.release()
	}
	if len(us) == 0 || !t.Recording() || t.Err() != nil || !y.RequiresGrad() {
		return y
	}
	return autograd.Apply(t, fsdpBackward{f: f, units: us, params: ps}, y)
}

// fsdpBackward is the identity; its backward, which runs before that of
// the part of the pass it follows, makes the part's units whole again,
// prefetches the units before them and gives their parameters zeroed
// whole gradients for this micro-batch.
type fsdpBackward struct {
	f      *FSDP
	units  []*fsdpUnit
	params []*nn.Parameter // the part's
}

// Forward implements autograd.Function.
func (b fsdpBackward) Forward(_ *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return in[0], nil
}

// Backward implements autograd.Function.
func (b fsdpBackward) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	ctx := c.Context()
	for _, u := range b.units {
		if !u.preserve {
			if err := u.acquire(ctx); err != nil {
				return nil, err
			}
			u.holds++
		}
		if err := u.prepareGrads(ctx, c.Pass()); err != nil {
			return nil, err
		}
	}
	return []*tensor.Tensor{dy}, b.f.prefetchFrom(ctx, b.f.lastPos(b.params), -1)
}

// gradReady is a parameter's grad hook. A parameter's hooks run once per
// backward pass, in the order of the passes: once every parameter of the
// unit has run one beyond the passes completed, the oldest open pass is
// complete; once no pass is open, the unit's reduction starts.
func (f *FSDP) gradReady(ctx context.Context, p *nn.Parameter) {
	u := f.byParam[p]
	if u.gradFull.Len() == 0 || len(u.open) == 0 {
		f.fail(fmt.Errorf("dp: FSDP: the gradient of %s was computed outside its unit's backward (the forward pass did not call ParamPostHook for the part using it)", p.Name))
		return
	}
	u.fired[slices.Index(u.params, p)]++
	for len(u.open) > 0 && slices.Min(u.fired) > 0 {
		for i := range u.fired {
			u.fired[i]--
		}
		u.open = u.open[1:]
	}
	if len(u.open) == 0 {
		f.fail(f.reduce(ctx, u))
	}
}

// reduce scales the unit's whole gradients, checks them, and issues their
// reduce-scatter (for one rank: adds them into the shard); the parameters
// the backward pass held are released. At most reduceCap elements stay in
// flight: the oldest reductions are finished first.
func (f *FSDP) reduce(ctx context.Context, u *fsdpUnit) error {
	if f.cfg.CheckForNaNInGrad && f.badGrad == "" {
		if name := u.nonFinite(); name != "" {
			f.badGrad = name
		}
	}
	if f.factor != 1 {
		scaleData(u.gradFull, f.factor, f.workers)
	}
	for ; u.holds > 0; u.holds-- {
		u.release()
	}
	if f.group == nil {
		addWidened(u.gradShard, u.gradFull)
		u.dropGrads()
		return nil
	}
	u.rsOut = ensureData(u.rsOut, f.gradDType, u.shardLen())
	w, err := f.group.ReduceScatterAsync(ctx, u.rsOut, u.gradFull, f.op)
	if err != nil {
		return fmt.Errorf("dp: FSDP gradient reduce-scatter of unit %d over %s: %w", u.index, f.group.Name(), err)
	}
	u.rs = w
	f.inflight = append(f.inflight, u)
	for n := f.inflightElems(); len(f.inflight) > 1 && n > f.reduceCap; n = f.inflightElems() {
		if err := f.finishReduce(ctx, f.inflight[0]); err != nil {
			return err
		}
	}
	return nil
}

// inflightElems is the number of gradient elements being reduced.
func (f *FSDP) inflightElems() int {
	n := 0
	for _, u := range f.inflight {
		n += u.numel
	}
	return n
}

// finishReduce waits for u's reduce-scatter, adds the result into the
// float32 shard and drops the whole gradients.
func (f *FSDP) finishReduce(ctx context.Context, u *fsdpUnit) error {
	w := u.rs
	u.rs = nil
	f.inflight = slices.DeleteFunc(f.inflight, func(x *fsdpUnit) bool { return x == u })
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("dp: FSDP gradient reduce-scatter of unit %d over %s: %w", u.index, f.group.Name(), err)
	}
	addWidened(u.gradShard, u.rsOut)
	u.dropGrads()
	return nil
}

// ZeroGradBuffer zeroes every gradient shard and drops what an inspection
// (AllGatherGrads) left.
func (f *FSDP) ZeroGradBuffer() {
	for _, u := range f.units {
		clear(u.gradShard)
		if u.rs == nil {
			u.dropGrads()
		}
	}
	f.reset()
	f.badGrad = ""
}

// NoSync returns a no-op: the sharded gradients are reduced after every
// micro-batch, as the reference's optim_grads and optim_grads_params do.
func (f *FSDP) NoSync() (resume func()) { return func() {} }

// StartGradSync issues the reduction of every unit whose gradients of the
// micro-batch are prepared and not yet reduced (the schedules'
// grad_sync_func, after a chunk's last backward pass).
func (f *FSDP) StartGradSync(ctx context.Context) error {
	for _, u := range f.units {
		if u.gradFull.Len() > 0 && u.rs == nil {
			if err := f.reduce(ctx, u); err != nil {
				return err
			}
		}
	}
	return nil
}

// FinishGradSync reduces what is left, waits for every reduction,
// releases what backward still held, all-reduces the shards across
// instances under hybrid sharding, and, under check_for_nan_in_grad,
// agrees with the other ranks on whether any gradient was non-finite.
// forceAllReduce (whole reduced gradients on every rank) is refused: the
// gradients stay sharded, and finalize_model_grads works on the shards
// after this; AllGatherGrads gathers them once it is done.
func (f *FSDP) FinishGradSync(ctx context.Context, forceAllReduce bool) error {
	if forceAllReduce {
		return fmt.Errorf("dp: FSDP keeps its gradients sharded: force_all_reduce is not supported (gather them with AllGatherGrads after finalize_model_grads)")
	}
	if err := f.first(); err != nil {
		return err
	}
	if err := f.StartGradSync(ctx); err != nil {
		return err
	}
	for len(f.inflight) > 0 {
		if err := f.finishReduce(ctx, f.inflight[0]); err != nil {
			return err
		}
	}
	for _, u := range f.units {
		for ; u.holds > 0; u.holds-- {
			u.release()
		}
	}
	if err := f.reduceAcrossInstances(ctx); err != nil {
		return err
	}
	return f.agreeFinite(ctx)
}

// reduceAcrossInstances all-reduces every gradient shard over the ranks
// holding it in the other instances (HSDP), in float32: a sum of the
// pre-scaled shards, or under average_in_collective an average.
func (f *FSDP) reduceAcrossInstances(ctx context.Context) error {
	if f.outer == nil {
		return nil
	}
	op := comm.Sum
	if f.cfg.AverageInCollective {
		op = comm.Avg
	}
	for _, u := range f.units {
		if err := f.outer.AllReduce(ctx, comm.F32(u.gradShard), op); err != nil {
			return fmt.Errorf("dp: FSDP all-reduce of unit %d's gradient shard across instances over %s: %w", u.index, f.outer.Name(), err)
		}
	}
	return nil
}

// agreeFinite all-gathers every rank's finding of a non-finite gradient
// (check_for_nan_in_grad) over the group, and under hybrid sharding
// all-reduces over the instances whether any was found, so that every
// rank stops, naming the (world) ranks and its own parameter.
func (f *FSDP) agreeFinite(ctx context.Context) error {
	if !f.cfg.CheckForNaNInGrad {
		return nil
	}
	mine := float32(0)
	if f.badGrad != "" {
		mine = 1
	}
	flags := []float32{mine}
	if f.group != nil {
		flags = make([]float32, f.shards)
		if err := f.group.AllGather(ctx, comm.F32(flags), comm.F32([]float32{mine})); err != nil {
			return fmt.Errorf("dp: FSDP gradient check all-gather over %s: %w", f.group.Name(), err)
		}
	}
	var ranks []string
	for r, x := range flags {
		if x != 0 {
			ranks = append(ranks, fmt.Sprint(f.worldRank(r)))
		}
	}
	anywhere := []float32{float32(min(len(ranks), 1))}
	if f.outer != nil {
		if err := f.outer.AllReduce(ctx, comm.F32(anywhere), comm.Max); err != nil {
			return fmt.Errorf("dp: FSDP gradient check all-reduce over %s: %w", f.outer.Name(), err)
		}
	}
	if anywhere[0] == 0 {
		return nil
	}
	msg := "a NaN or infinite gradient in another instance (over " + f.outerName() + ") before its reduce-scatter"
	if len(ranks) > 0 {
		msg = fmt.Sprintf("a NaN or infinite gradient on rank(s) %s before the reduce-scatter", strings.Join(ranks, ", "))
	}
	if f.badGrad != "" {
		msg += fmt.Sprintf(" (here: %s)", f.badGrad)
	}
	return &GradError{Msg: msg + "; lower the learning rate or check the data"}
}

// worldRank is the world rank of rank r of the group.
func (f *FSDP) worldRank(r int) int {
	if f.group == nil {
		return r
	}
	return f.group.GlobalRanks()[r]
}

// outerName names the group of the other instances.
func (f *FSDP) outerName() string {
	if f.outer == nil {
		return "none"
	}
	return f.outer.Name()
}

// ScaleGradients multiplies every gradient shard by s.
func (f *FSDP) ScaleGradients(s float32) {
	for _, u := range f.units {
		kernels.Scale(u.gradShard, s)
	}
}

// gatherInPlace all-gathers a unit that stays whole from the shards, its
// own slice of the buffer going in through a copy.
func (u *fsdpUnit) gatherInPlace(ctx context.Context) error {
	f := u.f
	in := f.pool.get(f.paramDType, u.shardLen(), -1)
	defer f.pool.put(in)
	in.CopyFrom(u.paramShard)
	if err := f.group.AllGather(ctx, u.full, in); err != nil {
		return fmt.Errorf("dp: FSDP parameter all-gather of unit %d over %s: %w", u.index, f.group.Name(), err)
	}
	return nil
}

// ParamsUpdated is StartParamSync: after the optimizer's step.
func (f *FSDP) ParamsUpdated(ctx context.Context) error { return f.StartParamSync(ctx, false) }

// StartParamSync brings the optimizer's updated shards to the parameters
// (after the step): under HFSDP each shard is first gathered from the
// instances' pieces; the units that stay whole are all-gathered in place;
// the others, released, are gathered by the next pass that uses them
// (anything still gathered or prefetched is stale and dropped). A unit
// some pass still uses is a programmer error.
func (f *FSDP) StartParamSync(ctx context.Context, _ bool) error {
	var errs []error
	for _, u := range f.units {
		if f.hfsdp {
			if err := u.gatherPieces(ctx); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if u.preserve {
			if f.group != nil {
				errs = append(errs, u.gatherInPlace(ctx))
			}
			continue
		}
		if u.users > 0 {
			errs = append(errs, fmt.Errorf("dp: FSDP unit %d is still in use by %d pass(es) at the optimizer step", u.index, u.users))
			continue
		}
		errs = append(errs, u.waitGather(ctx))
		if u.bound || u.full.Len() > 0 {
			u.unbind()
		}
	}
	return errors.Join(errs...)
}
