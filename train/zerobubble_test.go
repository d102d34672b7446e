package train

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// TestZeroBubbleMatchesOneFOneB: --pipeline-schedule zb-h1 and zb-h2
// train the GPT exactly as 1F1B does, bit for bit: the loss curve, the
// validation loss and the first step's gathered gradients, at PP 2 and PP
// 4, with TP 2 and sequence parallelism under PP 2, with DP 2 and the
// distributed optimizer's overlapped reduction and gather
// (grad_sync_func), and with bf16.
func TestZeroBubbleMatchesOneFOneB(t *testing.T) {
	for _, c := range []struct {
		name string
		args func() Args
	}{
		{"pp2", func() Args { return ppArgs(2, 1, 2) }},
		{"pp4", func() Args { return ppArgs(4, 1, 4) }},
		{"tp2-sp-pp2", func() Args { a := ppArgs(4, 2, 2); a.Model.SequenceParallel = true; return a }},
		{"pp2-dp2-overlap", func() Args {
			a := ppArgs(4, 1, 2)
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather = true, true, true
			return a
		}},
		{"pp2-bf16", func() Args { a := ppArgs(2, 1, 2); a.Model.BF16 = true; return a }},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := c.args()
			base.TrainIters = 6
			wantLoss, wantGrads := tpRun(t, base)
			for _, sched := range []string{"zb-h1", "zb-h2"} {
				zb := base
				zb.PipelineSchedule = sched
				// The timeline of the last iteration proves the W's ran as
				// actions of their own (the same numbers alone would not).
				zb.ProfileSchedule = filepath.Join(t.TempDir(), "zb.svg")
				gotLoss, gotGrads := tpRun(t, zb)
				if svg, err := os.ReadFile(zb.ProfileSchedule); err != nil || !strings.Contains(string(svg), ">weight gradients<") {
					t.Errorf("%s: no weight-gradient step in the timeline (%v)", sched, err)
				}
				for i := range wantLoss {
					if math.Float64bits(gotLoss[i]) != math.Float64bits(wantLoss[i]) {
						t.Fatalf("%s: loss %d: %.9g, 1f1b %.9g", sched, i, gotLoss[i], wantLoss[i])
					}
				}
				sameTensors(t, wantGrads, gotGrads)
			}
		})
	}
}

// sameTensors fails unless two files hold the same tensors byte for byte.
func sameTensors(t *testing.T, want, got *safetensors.File) {
	t.Helper()
	if len(want.Tensors) != len(got.Tensors) {
		t.Fatalf("%d gradients, want %d", len(got.Tensors), len(want.Tensors))
	}
	for _, w := range want.Tensors {
		g, ok := got.Get(w.Name)
		if !ok || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("gradient %s differs", w.Name)
		}
	}
}

// TestDeferEmbeddingWgradMatchesOneFOneB: defer_embedding_wgrad_compute
// moves the last stage's output-layer weight gradients to the pipeline
// flush and trains the GPT exactly as without it, bit for bit: the loss
// curve and the first step's gathered gradients, every microbatch
// deferred or the last 2, under 1F1B at PP 2 and 4, under the interleaved
// schedule, with TP 2 and sequence parallelism, with untied embeddings,
// with DP 2 and the distributed optimizer's overlaps (grad_sync_func),
// and in bf16. Under ZeRO-3 the deferred microbatches' gradients reach
// the output layer's unit together and are reduce-scattered in one sum,
// as under ZB-H1: there the numbers agree to 1e-6 and 1e-5.
func TestDeferEmbeddingWgradMatchesOneFOneB(t *testing.T) {
	for _, c := range []struct {
		name   string
		limit  int
		args   func() Args
		approx bool
	}{
		{"pp2", 0, func() Args { return ppArgs(2, 1, 2) }, false},
		{"pp4-limit2", 2, func() Args { return ppArgs(4, 1, 4) }, false},
		{"pp2-vpp2", 0, func() Args { a := ppArgs(2, 1, 2); a.Model.VirtualPipelineModelParallelSize = 2; return a }, false},
		{"tp2-sp-pp2", 0, func() Args { a := ppArgs(4, 2, 2); a.Model.SequenceParallel = true; return a }, false},
		{"pp2-untied", 2, func() Args { a := ppArgs(2, 1, 2); a.Model.ShareEmbeddingsAndOutputWeights = false; return a }, false},
		{"pp2-dp2-overlap", 0, func() Args {
			a := ppArgs(4, 1, 2)
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather = true, true, true
			return a
		}, false},
		{"pp2-dp2-zero3", 2, func() Args { return fsdpLayout(4, 1, 2, "optim_grads_params") }, true},
		{"pp2-bf16", 0, func() Args { a := ppArgs(2, 1, 2); a.Model.BF16 = true; return a }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := c.args()
			base.TrainIters = 6
			wantLoss, wantGrads := tpRun(t, base)
			d := base
			d.Model.DeferEmbeddingWgradCompute, d.Model.WgradDeferralLimit = true, c.limit
			// The timeline proves the deferred work ran as its own step.
			d.ProfileSchedule = filepath.Join(t.TempDir(), "defer.svg")
			gotLoss, gotGrads := tpRun(t, d)
			if svg, err := os.ReadFile(d.ProfileSchedule); err != nil || !strings.Contains(string(svg), ">deferred output-layer weight gradients<") {
				t.Errorf("no deferred output-layer step in the timeline (%v)", err)
			}
			if c.approx {
				checkEquivalent(t, gotLoss, gotGrads, wantLoss, wantGrads, 1e-6, 1e-5)
				return
			}
			for i := range wantLoss {
				if math.Float64bits(gotLoss[i]) != math.Float64bits(wantLoss[i]) {
					t.Fatalf("loss %d: deferred %.9g, not deferred %.9g", i, gotLoss[i], wantLoss[i])
				}
			}
			sameTensors(t, wantGrads, gotGrads)
		})
	}
}
