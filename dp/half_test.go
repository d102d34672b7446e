package dp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor"
)

// halfCase is one mixed-precision configuration of TestHalfGradients.
type halfCase struct {
	name      string
	cfg       func(*config.DDPConfig)
	bucket    int
	instances int
}

func halfCases() []halfCase {
	return []halfCase{
		{"sync", func(c *config.DDPConfig) {}, config.NoBucketing, 1},
		{"sync-avg", func(c *config.DDPConfig) { c.AverageInCollective = true }, config.NoBucketing, 1},
		{"overlap", func(c *config.DDPConfig) { c.OverlapGradReduce = true }, 300, 1},
		{"overlap-per-param-avg", func(c *config.DDPConfig) { c.OverlapGradReduce, c.AverageInCollective = true, true }, 0, 1},
		{"distopt", func(c *config.DDPConfig) { c.UseDistributedOptimizer = true }, config.NoBucketing, 1},
		{"distopt-overlap-param-gather", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.OverlapGradReduce, c.OverlapParamGather = true, true, true
		}, 300, 1},
		{"distopt-avg", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.OverlapGradReduce, c.AverageInCollective = true, true, true
		}, 300, 1},
		{"distopt-fp32-accumulation", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.OverlapGradReduce, c.ReduceScatterWithFP32Accumulation = true, true, true
		}, 300, 1},
		{"distopt-fp32-accumulation-sync", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.ReduceScatterWithFP32Accumulation = true, true
		}, config.NoBucketing, 1},
		{"distopt-2-instances", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.OverlapGradReduce, c.NumDistributedOptimizerInstances = true, true, 2
		}, 300, 2},
	}
}

// halfPatterns are the param_name_patterns_for_fp32_local_accumulation of
// the cases with float32 local gradients: every bias and one weight.
var halfPatterns = []string{"*.bias", "decoder.layers.0.mlp.linear_fc1.weight"}

// TestHalfGradients runs every halfCase for bfloat16 and float16
// parameters, with grad_reduce_in_fp32 on and off (off: with and without
// float32 local accumulation of halfPatterns), on 2 and 4 data-parallel
// ranks, two iterations of two microbatches (the first NoSync): after
// FinalizeModelGrads every rank's gradients — this rank's shard under the
// distributed optimizer — must equal, bit for bit, the serial reference
// halfRef computed from the same per-rank inputs; padding must stay zero;
// every collective must carry the gradient type (the parameter type for the
// parameter all-gather), the fp32-accumulation cases by an all-to-all.
// Under the distributed optimizer AllGatherGrads must then give every rank
// the whole reference, and each rank's updated parameter shard must reach
// every rank of its instance, in 16 bits, bit for bit.
func TestHalfGradients(t *testing.T) {
	for _, pd := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, mode := range []string{"grad-reduce-in-fp32", "half-grads", "half-grads-fp32-local"} {
			for _, n := range []int{2, 4} {
				for _, hc := range halfCases() {
					t.Run(fmt.Sprintf("%v/%s/dp%d/%s", pd, mode, n, hc.name), func(t *testing.T) {
						cfg := config.DefaultDDPConfig()
						hc.cfg(&cfg)
						cfg.NumDistributedOptimizerInstances = hc.instances
						cfg.GradReduceInFP32 = mode == "grad-reduce-in-fp32"
						if mode == "half-grads-fp32-local" {
							cfg.ParamNamePatternsForFP32LocalAccumulation = halfPatterns
						}
						runHalfCase(t, pd, n, hc, cfg)
					})
				}
			}
		}
	}
}

func runHalfCase(t *testing.T, pd tensor.DType, n int, hc halfCase, cfg config.DDPConfig) {
	ref := halfRef{grad: GradDTypeFor(pd, cfg.GradReduceInFP32), ranks: n, instances: hc.instances,
		avg: cfg.AverageInCollective, fp32: map[int]bool{}}
	for k, s := range halfShapes {
		ref.fp32[k] = matchesFP32Pattern(cfg.ParamNamePatternsForFP32LocalAccumulation, s.name)
	}
	err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		intra, inter, err := groupsFor(ctx, g, hc.instances)
		if err != nil {
			return err
		}
		rec := &collLog{}
		ps := halfParams()
		d, err := New(ps, cfg, Options{Group: rec.wrap(intra), Inter: rec.wrap(inter), BucketSize: hc.bucket, ParamDType: pd})
		if err != nil {
			return err
		}
		if cfg.ParamNamePatternsForFP32LocalAccumulation != nil && !d.Buffer.HasFP32Grad(ps[2]) {
			return fmt.Errorf("%s has no float32 local gradient", ps[2].Name)
		}
		who := fmt.Sprintf("rank %d", g.Rank())
		for it := 0; it < 2; it++ {
			d.ZeroGradBuffer()
			rec.reset() // under overlap the reductions start in backward
			for mb := 0; mb < halfMicro; mb++ {
				if err := halfBackward(ctx, d, ps, mb < halfMicro-1, func(p, i int) float32 { return gradIn(it, g.Rank(), mb, p, i) }); err != nil {
					return err
				}
			}
			if err := FinalizeModelGrads(ctx, []Wrapper{d}, FinalizeOptions{}); err != nil {
				return err
			}
			want := func(p, i int) float32 { return ref.reduced(it, p, i) }
			mine := halfRegion(t, d)
			checkHalfGrads(t, d, ps, want, mine, fmt.Sprintf("%s iteration %d", who, it+1))
			checkPadding(t, d, who)
			checkOps(t, rec.take(), gradOps(cfg, d, inter), ref.grad, who+" gradient reduction")
			if !cfg.UseDistributedOptimizer {
				continue
			}
			if err := d.AllGatherGrads(ctx); err != nil {
				return err
			}
			checkHalfGrads(t, d, ps, want, func(int) bool { return true }, fmt.Sprintf("%s iteration %d after AllGatherGrads", who, it+1))
			checkOps(t, rec.take(), opsIf(d.group != nil, "allgather"), ref.grad, who+" AllGatherGrads")
			if err := checkParamGather(ctx, t, d, ps, g.Rank(), it, hc.instances); err != nil {
				return err
			}
			checkOps(t, rec.take(), opsIf(d.group != nil, "allgather"), pd, who+" parameter all-gather")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// r16 is the value v takes in type d: w(r(v)) for a 16-bit type, v itself
// for float32.
func r16(d tensor.DType, v float32) float32 {
	if !d.IsHalf() {
		return v
	}
	h := []uint16{0}
	f := []float32{v}
	tensor.RoundInto(d, h, f)
	tensor.WidenInto(d, f, h)
	return f[0]
}

// halfRef is the serial reference of TestHalfGradients.
type halfRef struct {
	grad             tensor.DType
	ranks, instances int
	avg              bool
	fp32             map[int]bool // parameters with float32 local gradients
}

// local is rank's gradient of element (p, i) after backward, in the
// gradient buffer: the microbatches summed in float32 and rounded once for
// a float32 local gradient, else each added to the buffer's value and
// rounded (g ← r(w(g) + x)).
func (h halfRef) local(it, rank, p, i int) float32 {
	var v float32
	for mb := 0; mb < halfMicro; mb++ {
		x := gradIn(it, rank, mb, p, i)
		if h.fp32[p] {
			v = float32(v + x)
		} else {
			v = r16(h.grad, float32(v+x))
		}
	}
	return r16(h.grad, v)
}

// reduced is element (p, i) after the data-parallel reduction: each
// rank's gradient scaled by 1/dp (r(w(g)·f), unless averaging in the
// collective), summed in float32 over the ranks of its optimizer instance
// in rank order (divided by their number under Avg) and rounded once; with
// several instances, the instances' results likewise summed in instance
// order and rounded once.
func (h halfRef) reduced(it, p, i int) float32 {
	f := 1 / float32(h.ranks)
	if h.avg {
		f = 1
	}
	per := h.ranks / h.instances
	var outs []float32
	for inst := 0; inst < h.instances; inst++ {
		var acc float32
		for j := 0; j < per; j++ {
			s := h.local(it, inst*per+j, p, i)
			if f != 1 {
				s = r16(h.grad, float32(s*f))
			}
			if j == 0 {
				acc = s
			} else {
				acc = float32(acc + s)
			}
		}
		if h.avg {
			acc = float32(acc / float32(per))
		}
		outs = append(outs, r16(h.grad, acc))
	}
	acc := outs[0]
	for _, o := range outs[1:] {
		acc = float32(acc + o)
	}
	if h.avg && h.instances > 1 {
		acc = float32(acc / float32(h.instances))
	}
	return r16(h.grad, acc)
}
