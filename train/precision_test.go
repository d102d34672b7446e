package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestBF16NearFloat32: bf16 training of the layout-test model follows the
// float32 loss curve to 2% at every step (bf16 rounds every GEMM input to
// 8 significant bits, so the curves are close, not equal).
func TestBF16NearFloat32(t *testing.T) {
	a := ppArgs(1, 1, 1)
	fp32, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Model.BF16 = true
	bf16, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range fp32.Losses {
		if e := relErr(bf16.Losses[i], fp32.Losses[i]); e > 0.02 {
			t.Errorf("step %d: bf16 loss %.6f, float32 %.6f (relative %.3g > 2%%)", i+1, bf16.Losses[i], fp32.Losses[i], e)
		}
		same = same && bf16.Losses[i] == fp32.Losses[i]
	}
	if same {
		t.Error("the bf16 loss curve equals the float32 one bit for bit: the parameters or GEMMs are not in bfloat16")
	}
}

// TestMixedPrecisionLayouts: with bf16 parameters (float32 and bfloat16
// gradients) and fp16 with a constant loss scale, DP 2 with and without
// the distributed optimizer and its overlaps, and TP2 × PP2 × DP2, follow
// the one-rank run of the same precision. The float32 sums of the
// gradients over ranks differ from one rank's in their last bits, as in
// float32 training, but here a main parameter that moves by one float32
// ulp can round to the neighbouring bfloat16 (2⁻⁸ away), so the curves
// agree to 1e-4 (seen: 2e-5 after 20 steps) rather than float32's 1e-6;
// 16-bit gradient buffers round the reduction itself, so to 1e-3.
func TestMixedPrecisionLayouts(t *testing.T) {
	bf16 := func(a *Args) { a.Model.BF16 = true }
	bf16Grads := func(a *Args) { a.Model.BF16, a.GradReduceInBF16 = true, true }
	fp16 := func(a *Args) { a.Model.FP16, a.LossScale = true, 1024 }
	for _, p := range []struct {
		name string
		set  func(a *Args)
		tol  float64
	}{{"bf16", bf16, 1e-4}, {"bf16-grads-bf16", bf16Grads, 1e-3}, {"fp16-scale-1024", fp16, 1e-3}} {
		one := ppArgs(1, 1, 1)
		p.set(&one)
		want, err := Run(context.Background(), one, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []struct {
			name string
			set  func(a *Args)
		}{
			{"dp2", func(a *Args) { *a = ppArgs(2, 1, 1) }},
			{"dp2-distopt-overlaps", func(a *Args) {
				*a = ppArgs(2, 1, 1)
				a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather, a.DDP.BucketSize = true, true, true, 4000
			}},
			{"tp2-pp2-dp2-distopt", func(a *Args) {
				*a = ppArgs(8, 2, 2)
				a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce = true, true
			}},
		} {
			t.Run(p.name+"/"+l.name, func(t *testing.T) {
				var a Args
				l.set(&a)
				p.set(&a)
				got, err := Run(context.Background(), a, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range want.Losses {
					if e := relErr(got.Losses[i], want.Losses[i]); e > p.tol {
						t.Errorf("step %d: loss %.8f, one rank %.8f (relative %.2g > %g)", i+1, got.Losses[i], want.Losses[i], e, p.tol)
					}
				}
			})
		}
	}
}

// TestFP16DynamicLossScale: fp16 starts at Megatron's loss scale 2³²,
// whose scaled gradients overflow float16; the dynamic scaler skips those
// steps (no update, the learning-rate schedule held), halves the scale
// once the hysteresis of 2 is used up, and trains once the gradients fit:
// skipped iterations are counted and reported, the first steps have no
// gradient norm, and the loss then falls.
func TestFP16DynamicLossScale(t *testing.T) {
	a := ppArgs(1, 1, 1)
	a.Model.FP16 = true
	a.TrainIters = 40
	a.LogJSON = filepath.Join(t.TempDir(), "log.jsonl")
	var out strings.Builder
	res, err := Run(context.Background(), a, Options{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped < 2 || res.Skipped >= a.TrainIters-5 {
		t.Fatalf("%d of %d steps skipped; want at least the first 2 (scale 2³² overflows float16) and training afterwards", res.Skipped, a.TrainIters)
	}
	if !math.IsNaN(res.GradNorms[0]) {
		t.Errorf("the first step (skipped) has gradient norm %g, want none (NaN)", res.GradNorms[0])
	}
	last := res.GradNorms[len(res.GradNorms)-1]
	if math.IsNaN(last) {
		t.Errorf("the last step was skipped too")
	}
	if res.Losses[len(res.Losses)-1] >= res.Losses[0] {
		t.Errorf("loss did not fall: %.4f → %.4f", res.Losses[0], res.Losses[len(res.Losses)-1])
	}
	if !strings.Contains(out.String(), "loss scale: ") || !strings.Contains(out.String(), "number of skipped iterations: ") {
		t.Errorf("the log line lacks the loss scale or the skipped count:\n%s", out.String())
	}
}

// TestMixedPrecisionResume: a bf16 run with the distributed optimizer and
// an fp16 run with the dynamic scaler, stopped at iteration 5 and resumed,
// continue bit for bit: the checkpoint holds the float32 main parameters
// and the loss scaler's state. The bf16 checkpoint also resumes at DP 1
// without the distributed optimizer (whole main parameters and moments),
// on the uninterrupted curve to the layouts' 1e-4.
func TestMixedPrecisionResume(t *testing.T) {
	for _, p := range []struct {
		name  string
		set   func(a *Args)
		other func(b *Args) // another layout to resume at (nil: none)
	}{
		{"bf16-dp2-distopt", func(a *Args) {
			*a = ppArgs(2, 1, 1)
			a.Model.BF16, a.DDP.UseDistributedOptimizer = true, true
		}, func(b *Args) { b.WorldSize, b.DDP.UseDistributedOptimizer = 1, false }},
		{"fp16-dynamic", func(a *Args) {
			*a = ppArgs(1, 1, 1)
			a.Model.FP16, a.InitialLossScale = true, 1<<20
		}, nil},
	} {
		t.Run(p.name, func(t *testing.T) {
			var a Args
			p.set(&a)
			a.TrainIters, a.LRDecayIters = 10, 10
			full, dir := runAndSaveAt5(t, a)
			resume := func(set func(b *Args), tol float64) {
				b := a
				b.Load = dir
				if set != nil {
					set(&b)
				}
				res, err := Run(context.Background(), b, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i, loss := range res.Losses {
					if e := relErr(loss, full.Losses[5+i]); e > tol {
						t.Errorf("iteration %d: loss %.9f, uninterrupted %.9f (relative %.2g > %g)", 6+i, loss, full.Losses[5+i], e, tol)
					}
				}
			}
			resume(nil, 0)
			if p.other != nil {
				resume(p.other, 1e-4)
			}
		})
	}
}

// TestPrecisionFlagErrors: impossible or ignored mixed-precision settings
// are refused before any rank starts, naming the flags.
func TestPrecisionFlagErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(a *Args)
		want string
	}{
		{"bf16 and fp16", func(a *Args) { a.Model.BF16, a.Model.FP16 = true, true }, "fp16 and bf16 are both true"},
		{"grad-reduce-in-bf16 without bf16", func(a *Args) { a.GradReduceInBF16 = true }, "--grad-reduce-in-bf16"},
		{"negative loss scale", func(a *Args) { a.Model.FP16, a.LossScale = true, -1 }, "--loss-scale -1"},
		{"NaN loss scale", func(a *Args) { a.Model.FP16, a.LossScale = true, math.NaN() }, "--loss-scale NaN"},
		{"loss scale in float32", func(a *Args) { a.LossScale = 128 }, "neither --bf16 nor --fp16"},
		{"dynamic flags with bf16", func(a *Args) { a.Model.BF16, a.Hysteresis = true, 4 }, "--hysteresis"},
		{"bad dynamic scaler", func(a *Args) { a.Model.FP16, a.MinLossScale = true, 0 }, "--min-loss-scale"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ppArgs(1, 1, 1)
			c.set(&a)
			_, err := Run(context.Background(), a, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}
