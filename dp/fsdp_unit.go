package dp

import (
	"context"
	"fmt"
	"math"
	"slices"

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

	// Parameters: the shard (the optimizer's, in the parameters' type; a
	// slice of full when the unit stays whole), the whole unit while
	// gathered (zero Buffer when not), the gather in
	// flight, whether the parameters' Values are bound to it, and how many
	// users hold it (forward parts and backward passes).
	paramShard comm.Buffer
	full       comm.Buffer
	gather     comm.Work
	bound      bool
	users      int
	holds      int // users that are backward passes, released when the gradients are reduced

	// Gradients: the float32 shard; the whole gradient of the
	// micro-batches in flight (zero Buffer when not prepared); the
	// backward passes that prepared it and have not completed it, oldest
	// first (autograd.Ctx.Pass: under a split backward a pass's weight
	// gradients land after later passes began), and per parameter the
	// hooks run beyond the passes completed; the reduce-scatter in flight
	// into rsOut.
	gradShard []float32
	gradFull  comm.Buffer
	open      []any
	fired     []int
	rs        comm.Work
	rsOut     comm.Buffer
}

// newUnit lays out ps as bucket index of l (FSDPLayout), copies each
// parameter's value into a whole buffer of the parameter type (rounded to
// nearest even for 16 bits), keeps this rank's shard of it, and makes
// each parameter's Value a view of the whole buffer — kept under
// preserve, else released at once.
func (f *FSDP) newUnit(index int, ps []*nn.Parameter, l Layout, preserve bool) *fsdpUnit {
	u := &fsdpUnit{f: f, index: index, params: ps, preserve: preserve, fired: make([]int, len(ps))}
	bk := l.Buckets[index]
	for _, i := range bk.Params {
		r := l.Ranges[i]
		u.ranges = append(u.ranges, ParamRange{Start: r.Start - bk.Start, End: r.End - bk.Start})
	}
	u.numel, u.unpadded = bk.End-bk.Start, bk.NumelUnpadded
	u.lo = f.rank * u.shardLen()
	full := newData(f.paramDType, u.numel)
	for k, p := range ps {
		r := u.ranges[k]
		v := viewOf(full, r.Start, r.End, p.Value.Shape())
		v.CopyFrom(p.Value)
		p.Value = v
	}
	u.gradShard = make([]float32, u.shardLen())
	if preserve {
		// The shard of a unit that stays whole is its slice of the whole
		// buffer, as the distributed optimizer's is of its bucket.
		u.full, u.bound = full, true
		u.paramShard = full.Slice(u.lo, u.lo+u.shardLen())
	} else {
		u.paramShard = cloneData(full.Slice(u.lo, u.lo+u.shardLen()))
		u.unbind()
	}
	return u
}

// shardLen is the length of every rank's shard.
func (u *fsdpUnit) shardLen() int { return u.numel / u.f.shards }

// optimizerRange is the unit's elements this rank's optimizer updates:
// its shard, or under HFSDP the instance's piece of it.
func (u *fsdpUnit) optimizerRange() (lo, hi int) {
	n := u.shardLen() / u.f.pieces()
	lo = u.lo
	if u.f.hfsdp {
		lo += u.f.outer.Rank() * n
	}
	return lo, lo + n
}

// gatherPieces all-gathers the optimizer's updated pieces of the shard
// across the instances (HFSDP), so that every instance holds the whole
// updated shard.
func (u *fsdpUnit) gatherPieces(ctx context.Context) error {
	f := u.f
	lo, hi := u.optimizerRange()
	in := f.pool.get(f.paramDType, hi-lo, -1)
	defer f.pool.put(in)
	in.CopyFrom(u.paramShard.Slice(lo-u.lo, hi-u.lo))
	if err := f.outer.AllGather(ctx, u.paramShard, in); err != nil {
		return fmt.Errorf("dp: FSDP parameter all-gather of unit %d's shard across instances over %s: %w", u.index, f.outer.Name(), err)
	}
	return nil
}

// startGather issues the all-gather of the unit's parameters from the
// shards (a copy for one rank) unless they are gathered or in flight.
func (u *fsdpUnit) startGather(ctx context.Context) error {
	if u.bound || u.gather != nil {
		return nil
	}
	f := u.f
	u.full = f.pool.get(f.paramDType, u.numel, -1)
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
	u.f.pool.put(u.full)
	u.full, u.bound = comm.Buffer{}, false
}

// prepareGrads gives the unit's parameters zeroed whole gradients for
// backward pass pass, views of one buffer in the gradient type, unless
// passes still open have them (their gradients and this pass's then
// accumulate together); a reduction still in flight from an earlier
// micro-batch is finished first.
func (u *fsdpUnit) prepareGrads(ctx context.Context, pass any) error {
	if u.rs != nil {
		if err := u.f.finishReduce(ctx, u); err != nil {
			return err
		}
	}
	if !slices.Contains(u.open, pass) {
		u.open = append(u.open, pass)
	}
	if u.gradFull.Len() > 0 {
		return nil
	}
	u.gradFull = u.f.pool.get(u.f.gradDType, u.numel, u.f.workers)
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
	u.f.pool.put(u.gradFull)
	u.gradFull = comm.Buffer{}
	clear(u.fired)
	u.open = u.open[:0]
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

// bufPool keeps the whole buffers the units have released, by type and
// length, for the next gather or micro-batch: the reference's double
// buffer, holding as many as the passes held at once. Reusing them keeps
// a unit's gathers and gradients from becoming garbage every micro-batch
// (hundreds of megabytes an iteration for which Go's collector would grow
// the heap). Nothing keeps a slice of a released buffer: the parameters'
// Values are released (tensor.Tensor.Release, which every view and saved
// copy of them sees) and the gradients dropped before put.
type bufPool map[poolKey][]comm.Buffer

// poolKey is a buffer's type and length.
type poolKey struct {
	d tensor.DType
	n int
}

// get returns a buffer of n elements of type d: a released one, zeroed
// by that many workers unless zeroWorkers is negative (a gather
// overwrites every element), or a new, zeroed one.
func (p bufPool) get(d tensor.DType, n int, zeroWorkers int) comm.Buffer {
	k := poolKey{d, n}
	free := p[k]
	if len(free) == 0 {
		return newData(d, n)
	}
	b := free[len(free)-1]
	p[k] = free[:len(free)-1]
	if zeroWorkers >= 0 {
		clearData(b, zeroWorkers)
	}
	return b
}

// put keeps b for a later get.
func (p bufPool) put(b comm.Buffer) {
	if b.Len() == 0 {
		return
	}
	k := poolKey{dtypeOf(b), b.Len()}
	if poisonReleased {
		poison(b)
	}
	p[k] = append(p[k], b)
}

// poison fills b with NaN: a quiet float32 NaN, or the 16-bit type's.
func poison(b comm.Buffer) {
	switch d := dtypeOf(b); d {
	case tensor.Float32:
		nan := math.Float32frombits(0x7fc00001)
		for i, x := 0, b.Float32s(); i < len(x); i++ {
			x[i] = nan
		}
	default:
		nan := uint16(0x7fc1) // bfloat16
		if d == tensor.Float16 {
			nan = 0x7e01
		}
		for i, x := 0, b.Uint16s(); i < len(x); i++ {
			x[i] = nan
		}
	}
}
