package dp

import (
	"context"
	"fmt"
	"math"

	"github.com/gotron/gotron/comm"
)

// LargeGradFactor is check_for_large_grads' threshold: a bucket's local
// gradient norm larger than LargeGradFactor times the largest norm the
// bucket had in any earlier iteration is an error.
const LargeGradFactor = 10

// Kinds of gradient-check failure, as they travel in the check's
// all-reduce.
const (
	checkNaN   = 1
	checkInf   = 2
	checkLarge = 3
)

// gradCheck is a gradient check in flight: every rank's findings, summed
// over the data-parallel group (the reduction group, then across
// optimizer instances) so that every rank stops with the same error naming
// the rank that produced the bad gradient.
type gradCheck struct {
	g     *bucketGroup
	flags []int64 // per data-parallel rank: checkFields values
	work  comm.Work
}

// checkFields is the number of values a rank's findings take: the kind,
// the bucket, the parameter's index + 1, the norm's bits, the world rank.
const checkFields = 5

// startCheck checks each bucket's local gradients before the reduction
// (check_for_nan_in_grad: a NaN or an infinity in the bucket's L2 norm;
// check_for_large_grads: see LargeGradFactor) and launches the all-reduce
// that shares the findings. The norm is of the buffer as it will be
// reduced, in its type: √Σ w(g)², a 16-bit buffer widened block by block
// (sumSquares), after the float32 local gradients were rounded into it —
// so a float32 gradient that overflows float16 is found as infinite.
func (g *bucketGroup) startCheck(ctx context.Context) (*gradCheck, error) {
	d := g.d
	size, rank, world := 1, 0, -1
	for _, h := range []comm.Group{d.inter, d.group} { // rank = inter·|group| + group rank
		if h != nil {
			size, rank, world = size*h.Size(), rank*h.Size()+h.Rank(), h.GlobalRanks()[h.Rank()]
		}
	}
	c := &gradCheck{g: g, flags: make([]int64, checkFields*size)}
	mine := c.flags[checkFields*rank : checkFields*(rank+1)]
	mine[4] = int64(world)
	for _, b := range g.buckets {
		if mine[0] != 0 {
			break
		}
		n := math.Sqrt(sumSquares(b.GradData))
		switch {
		case d.cfg.CheckForNaNInGrad && (math.IsNaN(n) || math.IsInf(n, 0)):
			kind := int64(checkInf)
			if math.IsNaN(n) {
				kind = checkNaN
			}
			mine[0], mine[1], mine[2], mine[3] = kind, int64(b.ID), int64(d.nonFinite(b)+1), int64(math.Float64bits(n))
		case d.cfg.CheckForLargeGrads && d.largest[b.ID] > 0 && n > LargeGradFactor*d.largest[b.ID]:
			mine[0], mine[1], mine[2], mine[3] = checkLarge, int64(b.ID), int64(d.largestParam(b)+1), int64(math.Float64bits(n))
		case !math.IsNaN(n) && !math.IsInf(n, 0):
			d.largest[b.ID] = max(d.largest[b.ID], n)
		}
	}
	if d.group == nil {
		return c, nil
	}
	w, err := d.group.AllReduceAsync(ctx, comm.I64(c.flags), comm.Sum)
	if err != nil {
		return nil, fmt.Errorf("dp: gradient check of bucket group %d over %s: %w", g.index, d.group.Name(), err)
	}
	c.work = w
	return c, nil
}

// finish waits for the findings and returns an error for the lowest rank
// that found a bad gradient.
func (c *gradCheck) finish(ctx context.Context) error {
	d := c.g.d
	if c.work != nil {
		if err := c.work.Wait(ctx); err != nil {
			return fmt.Errorf("dp: gradient check of bucket group %d over %s: %w", c.g.index, d.group.Name(), err)
		}
	}
	if d.inter != nil {
		if err := d.inter.AllReduce(ctx, comm.I64(c.flags), comm.Sum); err != nil {
			return fmt.Errorf("dp: gradient check of bucket group %d across optimizer instances over %s: %w", c.g.index, d.inter.Name(), err)
		}
	}
	for r := 0; r < len(c.flags)/checkFields; r++ {
		f := c.flags[checkFields*r : checkFields*(r+1)]
		if f[0] == 0 {
			continue
		}
		who := "this rank"
		switch {
		case d.group != nil && d.inter == nil:
			who = fmt.Sprintf("data-parallel rank %d (world rank %d) of %s", r, f[4], d.group.Name())
		case f[4] >= 0:
			who = fmt.Sprintf("world rank %d (optimizer instance %d)", f[4], r/max(d.shards, 1))
		}
		name := "the bucket's padding"
		if i := int(f[2]) - 1; i >= 0 && i < len(d.Buffer.Params) {
			name = d.Buffer.Params[i].Name
		}
		norm := math.Float64frombits(uint64(f[3]))
		switch f[0] {
		case checkNaN, checkInf:
			what := "NaN"
			if f[0] == checkInf {
				what = "an infinite value"
			}
			return &GradError{Msg: fmt.Sprintf("check_for_nan_in_grad: training diverged: the local gradient of %s in bucket %d holds %s on %s, before the data-parallel reduction (bucket norm %g); the step is not applied and nothing is saved: lower --lr, set --clip-grad, or look for bad input data", name, f[1], what, who, norm)}
		default:
			return &GradError{Msg: fmt.Sprintf("check_for_large_grads: the local gradient norm of bucket %d is %g on %s, more than %d× the largest it had before; its largest parameter gradient is %s; the step is not applied and nothing is saved: lower --lr or set --clip-grad", f[1], norm, who, LargeGradFactor, name)}
		}
	}
	return nil
}

// GradError is a failed gradient check: every rank of the data-parallel
// group returns the same one.
type GradError struct{ Msg string }

func (e *GradError) Error() string { return "dp: " + e.Msg }

// nonFinite returns the buffer index of b's first parameter whose gradient
// (its range of the gradient buffer) holds a NaN or an infinity, or -1
// (the bad value is in padding).
func (d *DDP) nonFinite(b *Bucket) int {
	for _, p := range b.Params {
		s := sumSquares(d.Buffer.GradInBuffer(p))
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return d.Buffer.ParamIndex(p)
		}
	}
	return -1
}

// largestParam returns the buffer index of b's parameter with the largest
// gradient norm (of its range of the gradient buffer).
func (d *DDP) largestParam(b *Bucket) int {
	best, at := -1.0, -1
	for _, p := range b.Params {
		if s := sumSquares(d.Buffer.GradInBuffer(p)); s > best {
			best, at = s, d.Buffer.ParamIndex(p)
		}
	}
	return at
}
