package train

import (
	"context"
	"path/filepath"
	"testing"
)

// TestDataParallelBuffersMatchSingleRank is the data-parallel layout-equivalence
// test: DP 2 and 4 with the distributed optimizer, overlapped gradient
// reduction (several buckets), overlapped parameter gathering,
// grad_reduce_in_fp32, two optimizer instances on DP 4, and overlapped
// reduction with full and selective recompute (parameters whose gradients
// complete inside a recomputed region); TP2 × PP2 × DP2
// with the distributed optimizer and both overlaps; PP2 with VPP 2 × DP2
// with aligned parameter gathers. The 20-step loss curve and the final
// validation loss equal the one-rank ones to 1e-6 relative, and the first
// step's gradients, gathered to whole tensors, to 1e-5.
func TestDataParallelBuffersMatchSingleRank(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, ppArgs(1, 1, 1))
	for _, l := range []struct {
		name string
		set  func(a *Args)
	}{
		{"dp2-distopt", func(a *Args) { *a = ppArgs(2, 1, 1); a.DDP.UseDistributedOptimizer = true }},
		{"dp4-distopt", func(a *Args) { *a = ppArgs(4, 1, 1); a.DDP.UseDistributedOptimizer = true }},
		{"dp2-overlap-grad-reduce", func(a *Args) {
			*a = ppArgs(2, 1, 1)
			a.DDP.OverlapGradReduce, a.DDP.BucketSize = true, 4000
		}},
		{"dp4-overlap-num-buckets", func(a *Args) {
			*a = ppArgs(4, 1, 1)
			a.DDP.OverlapGradReduce, a.DDP.NumBuckets = true, 5
		}},
		{"dp2-distopt-overlap-param-gather", func(a *Args) {
			*a = ppArgs(2, 1, 1)
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather, a.DDP.BucketSize = true, true, true, 4000
		}},
		{"dp4-distopt-overlap-param-gather", func(a *Args) {
			*a = ppArgs(4, 1, 1)
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather, a.DDP.BucketSize = true, true, true, 4000
		}},
		{"dp2-distopt-overlaps-full-recompute", func(a *Args) {
			*a = ppArgs(2, 1, 1)
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather, a.DDP.BucketSize = true, true, true, 3000
			a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "block", 2
		}},
		{"dp2-overlap-selective-recompute", func(a *Args) {
			*a = ppArgs(2, 1, 1)
			a.DDP.OverlapGradReduce, a.DDP.BucketSize = true, 3000
			a.Model.RecomputeGranularity = "selective"
		}},
		{"dp2-grad-reduce-in-fp32", func(a *Args) { *a = ppArgs(2, 1, 1); a.DDP.GradReduceInFP32 = true }},
		{"dp4-distopt-2-instances", func(a *Args) {
			*a = ppArgs(4, 1, 1)
			a.DDP.UseDistributedOptimizer, a.DDP.NumDistributedOptimizerInstances, a.DDP.OverlapGradReduce = true, 2, true
		}},
		{"tp2-pp2-dp2-distopt-overlaps", func(a *Args) {
			*a = ppArgs(8, 2, 2)
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather = true, true, true
		}},
		{"pp2-vpp2-dp2-distopt-aligned-gather", func(a *Args) {
			*a = ppArgs(4, 1, 2)
			a.Model.VirtualPipelineModelParallelSize = 2
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather = true, true, true
		}},
	} {
		t.Run(l.name, func(t *testing.T) {
			var a Args
			l.set(&a)
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}

// TestDistributedOptimizerResume: a DP 2 run with the distributed
// optimizer stopped at iteration 5 resumes from its checkpoint bit for bit
// under the same layout, and with the uninterrupted loss curve to 1e-6 at
// DP 4 with the distributed optimizer and at DP 1 without it (the
// checkpoint holds whole moments, whatever the shards).
func TestDistributedOptimizerResume(t *testing.T) {
	a := ppArgs(2, 1, 1)
	a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce = true, true
	a.TrainIters, a.LRDecayIters = 10, 10
	full, dir := runAndSaveAt5(t, a)
	for _, l := range []struct {
		name string
		set  func(b *Args)
		tol  float64
	}{
		{"same layout", func(b *Args) {}, 0},
		{"dp4 distopt", func(b *Args) { b.WorldSize, b.GlobalBatchSize = 4, a.GlobalBatchSize }, 1e-6},
		{"dp1 plain", func(b *Args) { b.WorldSize, b.DDP.UseDistributedOptimizer, b.DDP.OverlapGradReduce = 1, false, false }, 1e-6},
	} {
		t.Run(l.name, func(t *testing.T) {
			b := a
			b.Load = dir
			l.set(&b)
			res, err := Run(context.Background(), b, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, loss := range res.Losses {
				if e := relErr(loss, full.Losses[5+i]); e > l.tol {
					t.Errorf("iteration %d: loss %.9f, uninterrupted %.9f (relative %.2g > %g)", 6+i, loss, full.Losses[5+i], e, l.tol)
				}
			}
		})
	}
}

// runAndSaveAt5 trains a (10 iterations) uninterrupted, then again for 5
// iterations saving a checkpoint at the 5th; it returns the uninterrupted
// run and the checkpoint directory.
func runAndSaveAt5(t *testing.T, a Args) (*Result, string) {
	t.Helper()
	full, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	first := a
	first.TrainIters, first.Save, first.SaveInterval = 5, dir, 5
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	return full, dir
}
