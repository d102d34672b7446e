package dp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// fsdpUnit is one FSDP unit: its parameters laid out back to back in a
// flat buffer of numel elements (padded to BucketEndDivisor), of which
// this rank keeps [lo, lo+numel/shards).
type fsdpUnit struct {
	f        *FSDP
	index    int
	params   []*nn.Parameter
	ranges   []ParamRange
	numel    int
	unpadded int
	lo       int
	preserve bool // whole between passes (optim_grads, or the parameters in no unit)

	// Parameters: the shard (the optimizer's, in the parameters' type),
	// the whole unit while gathered (zero Buffer when not), the gather in
	// flight, whether the parameters' Values are bound to it, and how many
	// users hold it (forward parts and backward passes).
	paramShard comm.Buffer
	full       comm.Buffer
	gather     comm.Work
	bound      bool
	users      int
	holds      int // users that are backward passes, released when the gradients are reduced

	// Gradients: the float32 shard, the whole gradient of the current
	// micro-batch (zero Buffer when not prepared), which parameters have
	// theirs complete, and the reduce-scatter in flight into rsOut.
	gradShard []float32
	gradFull  comm.Buffer
	ready     []bool
	nready    int
	rs        comm.Work
	rsOut     comm.Buffer
}

// newUnit lays out ps, copies each parameter's value into a whole buffer
// of the parameter type (rounded to nearest even for 16 bits), keeps this
// rank's shard of it, and makes each parameter's Value a view of the
// whole buffer — kept under preserve, else released at once.
func (f *FSDP) newUnit(index int, ps []*nn.Parameter, preserve bool) *fsdpUnit {
	u := &fsdpUnit{f: f, index: index, params: ps, preserve: preserve, ready: make([]bool, len(ps))}
	for _, p := range ps {
		n := p.Value.Len()
		u.ranges = append(u.ranges, ParamRange{Start: u.unpadded, End: u.unpadded + n})
		u.unpadded += n
	}
	u.numel = padTo(max(u.unpadded, 1), BucketEndDivisor(f.shards, f.cfg.PadBucketsForHighNCCLBusBW))
	u.lo = f.rank * u.shardLen()
	full := newData(f.paramDType, u.numel)
	for k, p := range ps {
		r := u.ranges[k]
		v := viewOf(full, r.Start, r.End, p.Value.Shape())
		v.CopyFrom(p.Value)
		p.Value = v
	}
	u.paramShard = cloneData(full.Slice(u.lo, u.lo+u.shardLen()))
	u.gradShard = make([]float32, u.shardLen())
	if preserve {
		u.full, u.bound = full, true
	} else {
		u.unbind()
	}
	return u
}

// shardLen is the length of every rank's shard.
func (u *fsdpUnit) shardLen() int { return u.numel / u.f.shards }

// startGather issues the all-gather of the unit's parameters from the
// shards (a copy for one rank) unless they are gathered or in flight.
func (u *fsdpUnit) startGather(ctx context.Context) error {
	if u.bound || u.gather != nil {
		return nil
	}
	f := u.f
	u.full = newData(f.paramDType, u.numel)
	f.mem.params.add(u.full.Bytes())
	if f.group == nil {
		u.full.CopyFrom(u.paramShard)
		return nil
	}
	w, err := f.group.AllGatherAsync(ctx, u.full, u.paramShard)
	if err != nil {
		return fmt.Errorf("dp: FSDP parameter all-gather of unit %d over %s: %w", u.index, f.group.Name(), err)
	}
	u.gather = w
	return nil
}

// acquire makes the unit's parameters whole for one more user: gathered
// (or the prefetched gather waited for) and bound to the parameters'
// Values. A unit that stays whole has nothing to do.
func (u *fsdpUnit) acquire(ctx context.Context) error {
	if u.preserve {
		return nil
	}
	if err := u.startGather(ctx); err != nil {
		return err
	}
	if err := u.waitGather(ctx); err != nil {
		return err
	}
	u.bind()
	u.users++
	return nil
}

// waitGather waits for the gather in flight, if any.
func (u *fsdpUnit) waitGather(ctx context.Context) error {
	if u.gather == nil {
		return nil
	}
	w := u.gather
	u.gather = nil
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("dp: FSDP parameter all-gather of unit %d over %s: %w", u.index, u.f.group.Name(), err)
	}
	return nil
}

// release drops one user; the last releases the parameters' storage.
func (u *fsdpUnit) release() {
	if u.preserve || u.users == 0 {
		return
	}
	u.users--
	if u.users == 0 {
		u.unbind()
	}
}

// bind points every parameter's released Value at its range of the whole
// buffer.
func (u *fsdpUnit) bind() {
	if u.bound {
		return
	}
	for k, p := range u.params {
		r := u.ranges[k]
		s := u.full.Slice(r.Start, r.End)
		if u.f.paramDType.IsHalf() {
			p.Value.RestoreWithBits(s.Uint16s())
		} else {
			p.Value.RestoreWith(s.Float32s())
		}
	}
	u.bound = true
}

// unbind releases every parameter's Value and drops the whole buffer.
func (u *fsdpUnit) unbind() {
	for _, p := range u.params {
		p.Value.Release()
	}
	u.f.mem.params.add(-u.full.Bytes())
	u.full, u.bound = comm.Buffer{}, false
}

// prepareGrads gives the unit's parameters zeroed whole gradients, views
// of one buffer in the gradient type, unless this micro-batch's are
// there; a reduction still in flight from the previous micro-batch is
// finished first.
func (u *fsdpUnit) prepareGrads(ctx context.Context) error {
	if u.rs != nil {
		if err := u.f.finishReduce(ctx, u); err != nil {
			return err
		}
	}
	if u.gradFull.Len() > 0 {
		return nil
	}
	u.gradFull = newData(u.f.gradDType, u.numel)
	u.f.mem.grads.add(u.gradFull.Bytes())
	for k, p := range u.params {
		r := u.ranges[k]
		p.Grad = viewOf(u.gradFull, r.Start, r.End, p.Value.Shape())
	}
	return nil
}

// dropGrads drops the whole gradients once reduced.
func (u *fsdpUnit) dropGrads() {
	for _, p := range u.params {
		p.Grad = nil
	}
	u.f.mem.grads.add(-u.gradFull.Bytes())
	u.gradFull = comm.Buffer{}
	clear(u.ready)
	u.nready = 0
}

// nonFinite returns the name of the first parameter whose whole gradient
// holds a NaN or an infinity, or "".
func (u *fsdpUnit) nonFinite() string {
	for k, p := range u.params {
		r := u.ranges[k]
		if s := sumSquares(u.gradFull.Slice(r.Start, r.End)); s != s || s > maxFinite {
			return p.Name
		}
	}
	return ""
}

// maxFinite is the largest finite float64.
const maxFinite = 1.7976931348623157e308

// addWidened adds w(src) into dst, elementwise, in float32.
func addWidened(dst []float32, src comm.Buffer) {
	if d := dtypeOf(src); d.IsHalf() {
		h := src.Uint16s()
		var scratch [block]float32
		for a := 0; a < len(h); a += block {
			b := min(a+block, len(h))
			w := scratch[:b-a]
			tensor.WidenInto(d, w, h[a:b])
			for i, x := range w {
				dst[a+i] += x
			}
		}
		return
	}
	for i, x := range src.Float32s() {
		dst[i] += x
	}
}
