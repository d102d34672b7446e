package dp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// TestHalfBufferDTypes: the buffer's types follow the parameter type and
// grad_reduce_in_fp32 (GradDTypeFor) and are visible on the buffer, its
// buckets and the parameters; the parameters' float32 values are rounded
// to nearest even into the buffer; values and gradients are views of it
// (a parameter matched by the fp32 local patterns excepted: its Grad is a
// float32 tensor of its own).
func TestHalfBufferDTypes(t *testing.T) {
	for _, tc := range []struct {
		param      tensor.DType
		fp32Reduce bool
		patterns   []string
		grad       tensor.DType
	}{
		{tensor.Float32, false, nil, tensor.Float32},
		{tensor.BFloat16, true, nil, tensor.Float32},
		{tensor.BFloat16, false, nil, tensor.BFloat16},
		{tensor.Float16, true, nil, tensor.Float32},
		{tensor.Float16, false, []string{"*layernorm*"}, tensor.Float16},
	} {
		t.Run(fmt.Sprintf("%v/fp32-reduce=%v", tc.param, tc.fp32Reduce), func(t *testing.T) {
			cfg := config.DefaultDDPConfig()
			cfg.UseDistributedOptimizer, cfg.GradReduceInFP32 = true, tc.fp32Reduce
			cfg.ParamNamePatternsForFP32LocalAccumulation = tc.patterns
			ps := halfParams()
			d, err := New(ps, cfg, Options{BucketSize: 300, ParamDType: tc.param})
			if err != nil {
				t.Fatal(err)
			}
			b := d.Buffer
			if b.ParamDType != tc.param || b.GradDType != tc.grad || GradDTypeFor(tc.param, tc.fp32Reduce) != tc.grad {
				t.Fatalf("buffer types %v/%v, want %v/%v", b.ParamDType, b.GradDType, tc.param, tc.grad)
			}
			if b.ParamData.DType() != commDType(tc.param) || b.GradData.DType() != commDType(tc.grad) || b.ParamData.Len() != b.Layout.Numel {
				t.Fatalf("arrays %v and %v, want %v and %v of %d", b.ParamData, b.GradData, tc.param, tc.grad, b.Layout.Numel)
			}
			for _, bk := range b.Buckets {
				if bk.ParamData.DType() != b.ParamData.DType() || bk.GradData.DType() != b.GradData.DType() || bk.GradData.Len() != bk.End-bk.Start {
					t.Errorf("bucket %d: %v and %v", bk.ID, bk.ParamData, bk.GradData)
				}
			}
			for k, p := range ps {
				r, _ := b.Range(p)
				own := tc.patterns != nil && strings.Contains(p.Name, "layernorm")
				if p.Value.DType() != tc.param || b.HasFP32Grad(p) != own {
					t.Errorf("%s: value %v, float32 gradient of its own %v", p.Name, p.Value.DType(), b.HasFP32Grad(p))
				}
				if gd := p.Grad.DType(); (own && gd != tensor.Float32) || (!own && gd != tc.grad) {
					t.Errorf("%s: gradient %v", p.Name, gd)
				}
				for i := 0; i < p.Value.Len(); i++ {
					if got, want := elem(b.ParamData, r.Start+i), r16(tc.param, paramIn(k, i)); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s[%d] = %v in the buffer, want %v rounded to %v = %v", p.Name, i, got, paramIn(k, i), tc.param, want)
					}
				}
				// Writes through the buffer show through the tensors.
				roundInto(b.ParamData.Slice(r.Start, r.Start+1), []float32{3})
				roundInto(b.GradData.Slice(r.Start, r.Start+1), []float32{5})
				if v := p.Value.Float32().Data()[0]; v != 3 {
					t.Errorf("%s: value reads %v after the buffer was set to 3", p.Name, v)
				}
				if g := p.Grad.Float32().Data()[0]; (g == 5) == own {
					t.Errorf("%s: gradient reads %v after the buffer was set to 5 (own float32 gradient: %v)", p.Name, g, own)
				}
			}
		})
	}
}

// TestHalfScaleAndZero: ScaleGradients on a 16-bit buffer gives
// r(w(g)·s) for every element, and g·s in float32 for a float32 local
// gradient; ZeroGradBuffer zeroes both.
func TestHalfScaleAndZero(t *testing.T) {
	for _, pd := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		cfg := config.DefaultDDPConfig()
		cfg.ParamNamePatternsForFP32LocalAccumulation = []string{"*.bias"}
		ctx := context.Background()
		ps := halfParams()
		d, err := New(ps, cfg, Options{BucketSize: config.NoBucketing, ParamDType: pd, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		grad := func(p, i int) float32 { return gradIn(0, 0, 0, p, i) }
		if err := halfBackward(ctx, d, ps, false, grad); err != nil {
			t.Fatal(err)
		}
		const s = 0.3
		d.ScaleGradients(s)
		for k, p := range ps {
			for i := 0; i < p.Grad.Len(); i++ {
				g := p.Grad.Float32().Data()[i]
				want := r16(pd, float32(r16(pd, grad(k, i))*s))
				if d.Buffer.HasFP32Grad(p) {
					want = float32(grad(k, i) * s)
				}
				if math.Float32bits(g) != math.Float32bits(want) {
					t.Fatalf("%v: %s[%d] = %v after scaling by %v, want %v", pd, p.Name, i, g, s, want)
				}
			}
		}
		d.ZeroGradBuffer()
		for _, p := range ps {
			for i, g := range p.Grad.Float32().Data() {
				if math.Float32bits(g) != 0 {
					t.Fatalf("%v: %s[%d] = %v after ZeroGradBuffer", pd, p.Name, i, g)
				}
			}
		}
		for i := 0; i < d.Buffer.GradData.Len(); i++ {
			if !isZero(d.Buffer.GradData, i) {
				t.Fatalf("%v: gradient buffer element %d not zeroed", pd, i)
			}
		}
	}
}

// TestHalfNaNCheckNamesParameter: check_for_nan_in_grad on 16-bit
// gradient buffers — a bfloat16 NaN, a float16 infinity, and a float32
// local gradient of 70 000 that overflows float16 when rounded into the
// buffer — makes every rank return the GradError naming the parameter,
// its bucket and rank 1; check_for_large_grads names a gradient grown a
// thousandfold.
func TestHalfNaNCheckNamesParameter(t *testing.T) {
	const victim = "decoder.layers.0.mlp.linear_fc1.weight"
	const vk = 3 // victim's index in halfShapes
	for _, tc := range []struct {
		pd               tensor.DType
		overlap, distopt bool
		patterns         []string
		bad              func(g float32) float32
		words            []string
	}{
		{tensor.BFloat16, false, false, nil, func(float32) float32 { return float32(math.NaN()) }, []string{"NaN", "check_for_nan_in_grad"}},
		{tensor.BFloat16, true, true, nil, func(float32) float32 { return float32(math.NaN()) }, []string{"NaN"}},
		{tensor.Float16, true, false, nil, func(float32) float32 { return float32(math.Inf(-1)) }, []string{"an infinite value"}},
		{tensor.Float16, true, true, []string{victim}, func(float32) float32 { return 70000 }, []string{"an infinite value"}},
		{tensor.Float16, false, true, nil, func(g float32) float32 { return 1000 * g }, []string{"check_for_large_grads", "largest parameter gradient is " + victim}},
	} {
		t.Run(fmt.Sprintf("%v/overlap=%v/distopt=%v/fp32-local=%v", tc.pd, tc.overlap, tc.distopt, tc.patterns != nil), func(t *testing.T) {
			cfg := config.DefaultDDPConfig()
			cfg.OverlapGradReduce, cfg.UseDistributedOptimizer = tc.overlap, tc.distopt
			cfg.CheckForNaNInGrad, cfg.CheckForLargeGrads = true, true
			cfg.ParamNamePatternsForFP32LocalAccumulation = tc.patterns
			err := local.NewWorld(3, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				ps := halfParams()
				d, err := New(ps, cfg, Options{Group: g, BucketSize: 0, ParamDType: tc.pd})
				if err != nil {
					return err
				}
				var last error
				for it := 0; it < 2; it++ {
					d.ZeroGradBuffer()
					grad := func(p, i int) float32 {
						v := gradIn(it, g.Rank(), 0, p, i)
						if it == 1 && g.Rank() == 1 && p == vk && (i == 5 || tc.words[0] == "check_for_large_grads") {
							return tc.bad(v)
						}
						return v
					}
					if err := halfBackward(ctx, d, ps, false, grad); err != nil {
						return err
					}
					last = d.FinishGradSync(ctx, false)
					if it == 0 && last != nil {
						return last
					}
				}
				var ge *GradError
				if !errors.As(last, &ge) {
					return fmt.Errorf("rank %d: %v, want a GradError", g.Rank(), last)
				}
				r, _ := d.Buffer.Range(ps[vk])
				for _, want := range append([]string{victim, fmt.Sprintf("bucket %d", r.Bucket), "data-parallel rank 1 (world rank 1)"}, tc.words...) {
					if !strings.Contains(ge.Msg, want) {
						t.Errorf("rank %d: %q does not name %q", g.Rank(), ge.Msg, want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHalfFinalizeTP: finalize's tensor-parallel step on 16-bit gradients
// over 2 and 4 ranks. Sequence-parallel gradients are summed and
// AverageGradientsAcrossTP ones averaged, in the gradients' type: in
// bfloat16 r(Σ_k w(g_k)) (rank order, float32 accumulation, one rounding)
// and r(Σ_k w(g_k) / n); a float32 local gradient coalesced with them
// makes the coalesced buffer float32, where its sum stays float32 (not
// rounded) and the 16-bit ones are still rounded once.
func TestHalfFinalizeTP(t *testing.T) {
	for _, n := range []int{2, 4} {
		for _, patterns := range [][]string{nil, {"ln.bias"}} {
			t.Run(fmt.Sprintf("tp%d/fp32-local=%v", n, patterns != nil), func(t *testing.T) {
				grad := func(rank, p, i int) float32 { return gradIn(0, rank, 0, p, i) }
				cfg := config.DefaultDDPConfig()
				cfg.ParamNamePatternsForFP32LocalAccumulation = patterns
				err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
					ps := []*nn.Parameter{
						nn.NewParameter("ln.weight", tensor.New(3)),
						nn.NewParameter("fc.weight", tensor.New(2, 2)),
						nn.NewParameter("ln.bias", tensor.New(3)),
						nn.NewParameter("other.weight", tensor.New(5)),
					}
					ps[0].SequenceParallel, ps[2].SequenceParallel, ps[1].AverageGradientsAcrossTP = true, true, true
					d, err := New(ps, cfg, Options{BucketSize: config.NoBucketing, ParamDType: tensor.BFloat16})
					if err != nil {
						return err
					}
					rec := &collLog{}
					for pi, p := range ps {
						for i := 0; i < p.Grad.Len(); i++ {
							p.Grad.View(-1).Set(grad(g.Rank(), pi, i), i)
						}
					}
					if err := FinalizeModelGrads(ctx, []Wrapper{d}, FinalizeOptions{TP: rec.wrap(g), SequenceParallel: true}); err != nil {
						return err
					}
					// Every gradient enters the TP step in bfloat16: a
					// float32 local one went through the buffer in the
					// data-parallel step (of one rank) and was widened back.
					in := func(r, pi, i int) float32 { return r16(tensor.BFloat16, grad(r, pi, i)) }
					for pi, p := range ps {
						for i := 0; i < p.Grad.Len(); i++ {
							want := in(g.Rank(), pi, i)
							if p.SequenceParallel || p.AverageGradientsAcrossTP {
								acc := in(0, pi, i)
								for r := 1; r < n; r++ {
									acc = float32(acc + in(r, pi, i))
								}
								if p.AverageGradientsAcrossTP {
									acc = float32(acc / float32(n))
								}
								want = acc
								if !d.Buffer.HasFP32Grad(p) {
									want = r16(tensor.BFloat16, acc)
								}
							}
							if got := p.Grad.View(-1).At(i); math.Float32bits(got) != math.Float32bits(want) {
								return fmt.Errorf("rank %d: %s[%d] = %v, want %v", g.Rank(), p.Name, i, got, want)
							}
						}
					}
					sum := "bfloat16"
					if patterns != nil {
						sum = "float32"
					}
					if got, want := strings.Join(rec.take(), ","), "allreduce:bfloat16,allreduce:"+sum; got != want {
						t.Errorf("rank %d: collectives %s, want %s", g.Rank(), got, want)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestHalfBroadcastParams: BroadcastParams sends rank 0's bfloat16
// parameters, in bfloat16, to every rank.
func TestHalfBroadcastParams(t *testing.T) {
	err := local.NewWorld(3, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		ps := halfParams()
		for _, p := range ps { // different values per rank
			for i := range p.Value.Data() {
				p.Value.Data()[i] += float32(g.Rank())
			}
		}
		rec := &collLog{}
		d, err := New(ps, config.DefaultDDPConfig(), Options{Group: rec.wrap(g), BucketSize: config.NoBucketing, ParamDType: tensor.BFloat16})
		if err != nil {
			return err
		}
		if err := d.BroadcastParams(ctx); err != nil {
			return err
		}
		for k, p := range ps {
			for i := 0; i < p.Value.Len(); i++ {
				if got, want := p.Value.Float32().Data()[i], r16(tensor.BFloat16, paramIn(k, i)); math.Float32bits(got) != math.Float32bits(want) {
					return fmt.Errorf("rank %d: %s[%d] = %v after the broadcast, want rank 0's %v", g.Rank(), p.Name, i, got, want)
				}
			}
		}
		if got := strings.Join(rec.take(), ","); got != "broadcast:bfloat16" {
			t.Errorf("rank %d: collectives %s, want one bfloat16 broadcast", g.Rank(), got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHalfConfigRefusals: fp32 local accumulation patterns with float32
// gradient buffers, and a parameter type the buffer cannot hold, are
// refused with errors that say why.
func TestHalfConfigRefusals(t *testing.T) {
	cfg := config.DefaultDDPConfig()
	cfg.ParamNamePatternsForFP32LocalAccumulation = []string{"all"}
	_, err := New(halfParams(), cfg, Options{BucketSize: config.NoBucketing})
	if err == nil || !strings.Contains(err.Error(), "float32") || !strings.Contains(err.Error(), "leave it empty") {
		t.Errorf("patterns with float32 parameters: %v", err)
	}
	_, err = New(halfParams(), config.DefaultDDPConfig(), Options{BucketSize: config.NoBucketing, ParamDType: tensor.DType(9)})
	if err == nil || !strings.Contains(err.Error(), "DType(9)") {
		t.Errorf("parameter type DType(9): %v", err)
	}
	cfg.ParamNamePatternsForFP32LocalAccumulation = []string{"all"}
	d, err := New(halfParams(), cfg, Options{BucketSize: config.NoBucketing, ParamDType: tensor.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Parameters() {
		if !d.Buffer.HasFP32Grad(p) {
			t.Errorf(`"all" does not match %s`, p.Name)
		}
	}
}

// TestFnmatchPattern checks fnmatchPattern against Python's
// fnmatch.fnmatchcase (the expected values are Python 3's).
func TestFnmatchPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.bias", "decoder.layers.0.mlp.linear_fc1.bias", true},
		{"*.bias", "decoder.layers.0.mlp.linear_fc1.weight", false},
		{"decoder.*.linear_fc?.weight", "decoder.layers.0.mlp.linear_fc1.weight", true},
		{"decoder.*.linear_fc?.weight", "decoder.layers.0.mlp.linear_fc10.weight", false},
		{"*layers.[0-1].*", "decoder.layers.1.mlp.x", true},
		{"*layers.[!0-1].*", "decoder.layers.1.mlp.x", false},
		{"*layers.[!0-1].*", "decoder.layers.2.mlp.x", true},
		{"a[b", "a[b", true},
		{"a[b", "ab", false},
		{"[]]x", "]x", true},
		{"[!]]x", "]x", false},
		{"[!]]x", "ax", true},
		{"a/*", "a/b/c", true},
		{"*", "", true},
		{"?", "", false},
		{"[a-c-e]", "-", true},
		{"[a-c-e]", "d", false},
		{"[z-a]", "m", false},
		{"Decoder*", "decoder.x", false},
		{"**.weight", "w.weight", true},
		{"*a*b*", "xxaybzb", true},
	} {
		if got := fnmatchPattern(tc.pattern, tc.name); got != tc.want {
			t.Errorf("fnmatch(%q, %q) = %v, want %v", tc.name, tc.pattern, got, tc.want)
		}
	}
}
