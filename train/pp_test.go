package train

import (
	"context"
	"strings"
	"testing"
)

// ppArgs is tpArgs with four layers (so that every pipeline split of the
// tests holds whole layers) and four micro-batches per iteration on one
// data-parallel rank.
func ppArgs(world, tp, pp int) Args {
	a := tpArgs(world, tp)
	a.Model.NumLayers = 4
	a.Model.PipelineModelParallelSize = pp
	return a
}

// TestPipelineParallelMatchesSingleRank is the pipeline layout-equivalence
// test: PP 2 and 4, VPP 2 by size and by layout string, a layout with an
// empty stage, uneven first/last stages, VPP 2 on PP 4 without overlapped
// communication, TP2 × PP2 with SP and full recompute, and TP2 × PP2 × DP2
// on 8 ranks: the 20-step loss curve and the final validation loss equal
// the one-rank ones to 1e-6 relative, and the first step's gradients,
// gathered to whole tensors, to 1e-5.
func TestPipelineParallelMatchesSingleRank(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, ppArgs(1, 1, 1))
	off := false
	for _, l := range []struct {
		name string
		set  func(a *Args)
	}{
		{"pp2", func(a *Args) { *a = ppArgs(2, 1, 2) }},
		{"pp4", func(a *Args) { *a = ppArgs(4, 1, 4) }},
		{"pp2-vpp2", func(a *Args) { *a = ppArgs(2, 1, 2); a.Model.VirtualPipelineModelParallelSize = 2 }},
		{"pp2-layout-Et|t|t|tL", func(a *Args) { *a = ppArgs(2, 1, 2); a.Model.PipelineModelParallelLayout = "Et|t|t|tL" }},
		{"pp4-layout-empty-stage-E|tt||ttL", func(a *Args) { *a = ppArgs(4, 1, 4); a.Model.PipelineModelParallelLayout = "E|tt||ttL" }},
		{"pp2-uneven-first1-last3", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.NumLayersInFirstPipelineStage, a.Model.NumLayersInLastPipelineStage = 1, 3
		}},
		{"pp4-vpp2-no-overlap", func(a *Args) {
			*a = ppArgs(4, 1, 4)
			a.Model.PipelineModelParallelLayout = "E|t|t|t|t|||L"
			a.OverlapP2PComm = &off
		}},
		{"pp4-vpp2-overlap-warmup-flush", func(a *Args) {
			*a = ppArgs(4, 1, 4)
			a.Model.PipelineModelParallelLayout = "E|t|t|t|t|||L"
			a.Model.OverlapP2PCommWarmupFlush = true
		}},
		{"tp2-pp2-sp-full-recompute", func(a *Args) {
			*a = ppArgs(4, 2, 2)
			a.Model.SequenceParallel = true
			a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "uniform", 1
		}},
		{"tp2-pp2-dp2", func(a *Args) { *a = ppArgs(8, 2, 2) }},
	} {
		t.Run(l.name, func(t *testing.T) {
			var a Args
			l.set(&a)
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}

// TestPipelineResumeAcrossLayouts: a PP 2 run stopped at iteration 5
// resumes from its checkpoint bit for bit at PP 2, and with the
// uninterrupted loss curve to 1e-6 at one rank and at PP 4 with VPP
// (checkpoints hold whole tensors under global names).
func TestPipelineResumeAcrossLayouts(t *testing.T) {
	a := ppArgs(2, 1, 2)
	a.TrainIters, a.LRDecayIters = 10, 10
	full, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first := a
	first.TrainIters, first.Save = 5, dir
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	one := ppArgs(1, 1, 1)
	one.TrainIters, one.LRDecayIters = 10, 10
	pp4 := ppArgs(4, 1, 4)
	pp4.TrainIters, pp4.LRDecayIters = 10, 10
	pp4.Model.PipelineModelParallelLayout = "E|t|t|t|t|||L"
	for _, b := range []Args{a, one, pp4} {
		b.Load = dir
		res, err := Run(context.Background(), b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.StartIteration != 5 || len(res.Losses) != 5 {
			t.Fatalf("resumed at %d with %d losses, want 5 and 5", res.StartIteration, len(res.Losses))
		}
		for i, l := range res.Losses {
			want := full.Losses[5+i]
			same := b.Model.PipelineModelParallelSize == 2
			if same && l != want || relErr(l, want) > 1e-6 {
				t.Errorf("resumed at PP %d: iteration %d loss %.9f, uninterrupted PP 2 %.9f", b.Model.PipelineModelParallelSize, 6+i, l, want)
			}
		}
	}
}

// TestPipelineParallelErrors: invalid pipeline settings are refused before
// any rank starts, with one error naming the flags and the fix.
func TestPipelineParallelErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(a *Args)
		want []string
	}{
		{"layers not divisible", func(a *Args) { *a = ppArgs(3, 1, 3) }, []string{"num_layers", "pipeline_model_parallel_size"}},
		{"world not divisible", func(a *Args) { *a = ppArgs(3, 1, 2) }, []string{"world"}},
		{"group size", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.VirtualPipelineModelParallelSize = 2
			a.GlobalBatchSize = 6 // M = 3: 3 mod 2 = 1 < 2
		}, []string{"microbatch_group_size_per_vp_stage", "3 mod 2 = 1", "--global-batch-size 6"}},
		{"vpp on pp2 without overlap", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.VirtualPipelineModelParallelSize = 2
			off := false
			a.OverlapP2PComm = &off
		}, []string{"overlap_p2p_comm", "pipeline_model_parallel_size"}},
		{"bad layout character", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.PipelineModelParallelLayout = "Ett|tx|L"
		}, []string{"'x'"}},
		{"layout decoder count", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.PipelineModelParallelLayout = "Ett|tL"
		}, []string{"num_layers"}},
		{"group size without interleaving", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.MicrobatchGroupSizePerVPStage = 3
		}, []string{"--microbatch-group-size-per-virtual-pipeline-stage 3", "--virtual-pipeline-model-parallel-size"}},
		{"profile without a pipeline", func(a *Args) {
			*a = ppArgs(1, 1, 1)
			a.ProfileSchedule = "schedule.svg"
		}, []string{"--profile-schedule", "--pipeline-model-parallel-size is 1"}},
		{"profile into a missing directory", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.ProfileSchedule = "/nonexistent/schedule.svg"
		}, []string{"/nonexistent", "does not exist"}},
		{"m without mtp_num_layers", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.PipelineModelParallelLayout = "Ett|ttmL"
		}, []string{"1 MTP layers (m)", "remove the m or set --mtp-num-layers 1"}},
		{"mtp with learned positions", func(a *Args) {
			*a = ppArgs(2, 1, 2)
			a.Model.MTPNumLayers = 1
		}, []string{"mtp_num_layers = 1 with position_embedding_type learned_absolute", "rope or none"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a Args
			c.set(&a)
			_, err := Run(context.Background(), a, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "invalid arguments") {
				t.Errorf("error %q is not reported as invalid arguments before the ranks start", err)
			}
			t.Log(err)
		})
	}
}

// TestPipelineSampleMatchesSingleRank: the text sample generated through
// the pipeline (each step through the stages, the byte broadcast from the
// last) is the one-rank sample, with and without interleaving.
func TestPipelineSampleMatchesSingleRank(t *testing.T) {
	sample := func(a Args) string {
		t.Helper()
		a.Model.VocabSize, a.TrainIters, a.LRWarmupIters, a.Sample = 256, 2, 0, 24
		res, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Sample
	}
	want := sample(ppArgs(1, 1, 1))
	vpp := ppArgs(2, 1, 2)
	vpp.Model.VirtualPipelineModelParallelSize = 2
	for _, a := range []Args{ppArgs(2, 1, 2), vpp, ppArgs(4, 2, 2)} {
		if got := sample(a); got != want {
			t.Errorf("PP %d, VPP %d, TP %d: sample %q, one rank %q", a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize, a.Model.TensorModelParallelSize, got, want)
		}
	}
}

// TestSampleAfterOverlappedParamGather: with the distributed optimizer's
// parameter all-gather left for the next forward pass
// (--overlap-param-gather), the sample after training sees every shard's
// last update: it is the sample of the same run without the overlaps.
func TestSampleAfterOverlappedParamGather(t *testing.T) {
	sample := func(overlap bool) string {
		t.Helper()
		a := tpArgs(2, 1)
		a.Model.VocabSize, a.TrainIters, a.LRWarmupIters, a.Sample = 256, 3, 0, 24
		a.EvalIters = 0           // no final validation, whose forward pass would gather
		a.LR, a.ClipGrad = 0.3, 0 // a last step large enough to change the text
		a.DDP.UseDistributedOptimizer = true
		a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather = overlap, overlap
		return mustRun(t, a).Sample
	}
	if got, want := sample(true), sample(false); got != want {
		t.Errorf("sample with the overlapped parameter all-gather %q, without %q", got, want)
	}
}

// TestSampleGreedy: --sample-temperature 0 takes the likeliest token each
// time, through the pipeline as on one rank, the first of equal logits.
func TestSampleGreedy(t *testing.T) {
	greedy := func(a Args) string {
		t.Helper()
		a.Model.VocabSize, a.TrainIters, a.LRWarmupIters, a.Sample, a.SampleTemperature = 256, 2, 0, 16, 0
		res, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Sample
	}
	want := greedy(ppArgs(1, 1, 1))
	if got := greedy(ppArgs(2, 1, 2)); got != want || len(want) == 0 {
		t.Errorf("PP 2: greedy sample %q, one rank %q", got, want)
	}
	if got := argmax([]float32{1, 3, 3, 2}); got != 1 {
		t.Errorf("argmax %d, want 1", got)
	}
}

// TestSeedEmptyStageLayout trains the pipeline seed's other example,
// E||t|L (4 stages on PP 2 × VPP 2 for one decoder layer: the embedding,
// an empty stage, the layer, the loss) and checks the 20-step loss curve
// against one rank's to 1e-6 and the first step's gradients to 1e-5.
func TestSeedEmptyStageLayout(t *testing.T) {
	one := ppArgs(1, 1, 1)
	one.Model.NumLayers = 1
	wantLoss, wantGrads := tpRun(t, one)
	a := ppArgs(2, 1, 2)
	a.Model.NumLayers, a.Model.PipelineModelParallelLayout = 1, "E||t|L"
	losses, grads := tpRun(t, a)
	checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
}
