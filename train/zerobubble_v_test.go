package train

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestZeroBubbleVMatchesInterleaved: --pipeline-schedule zb-v (and
// dualpipev, with at least 2P microbatches) places the GPT's 2P stages in a V (rank r holds stages r and 2P−1−r, the embedding
// and the loss both on rank 0, the tied embedding's two copies summed
// there) and trains it exactly as the interleaved 1F1B does on the same
// stages, bit for bit: the loss curve, the validation loss and the first
// step's gathered gradients, at PP 2 and PP 4, with TP 2 and sequence
// parallelism, with untied embeddings, with DP 2 and the distributed
// optimizer's overlapped reduction and gather, in bf16, with CP 2, with
// full and selective recompute, and for a MoE model with EP 2; under ZeRO-3 to 1e-6 (losses) and 1e-5
// (gradients), its reduce-scatters grouping the microbatches otherwise.
func TestZeroBubbleVMatchesInterleaved(t *testing.T) {
	vpp := func(a Args) Args { a.Model.VirtualPipelineModelParallelSize = 2; return a }
	for _, c := range []struct {
		name string
		args func() Args
	}{
		{"pp2", func() Args { return vpp(ppArgs(2, 1, 2)) }},
		{"pp4", func() Args { a := vpp(ppArgs(4, 1, 4)); a.Model.NumLayers = 8; return a }},
		{"tp2-sp-pp2", func() Args { a := vpp(ppArgs(4, 2, 2)); a.Model.SequenceParallel = true; return a }},
		{"pp2-untied", func() Args { a := vpp(ppArgs(2, 1, 2)); a.Model.ShareEmbeddingsAndOutputWeights = false; return a }},
		{"pp2-dp2-overlap", func() Args {
			a := vpp(ppArgs(4, 1, 2))
			a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce, a.DDP.OverlapParamGather = true, true, true
			return a
		}},
		{"pp2-bf16", func() Args { a := vpp(ppArgs(2, 1, 2)); a.Model.BF16 = true; return a }},
		{"pp2-dp2-zero3", func() Args { return vpp(fsdpLayout(4, 1, 2, "optim_grads_params")) }},
		{"pp2-cp2", func() Args { a := vpp(ppArgs(4, 1, 2)); a.Model.ContextParallelSize = 2; return a }},
		{"pp2-full-recompute", func() Args { a := vpp(ppArgs(2, 1, 2)); setRecompute(&a, "full"); return a }},
		{"pp2-selective-recompute", func() Args { a := vpp(ppArgs(2, 1, 2)); setRecompute(&a, "selective"); return a }},
		{"moe-ep2-pp2", func() Args {
			return moeLayout{world: 4, ep: 2, pp: 2, vpp: 2, dispatcher: "alltoall"}.args()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := c.args()
			base.TrainIters = 6
			// DualPipeV takes at least 2P microbatches per replica.
			m := &base.Model
			p, dp := m.PipelineModelParallelSize, base.WorldSize/(m.TensorModelParallelSize*m.PipelineModelParallelSize*max(m.ContextParallelSize, 1))
			base.GlobalBatchSize = max(base.GlobalBatchSize, 2*p*base.MicroBatchSize*dp)
			if p == 2 {
				on := true // the interleaved schedule at PP 2 needs it
				base.OverlapP2PComm = &on
			}
			wantLoss, wantGrads := tpRun(t, base)
			for _, sched := range []string{"zb-v", "dualpipev"} {
				zb := base
				zb.OverlapP2PComm = nil
				zb.PipelineSchedule = sched
				zb.ProfileSchedule = filepath.Join(t.TempDir(), "v.svg")
				gotLoss, gotGrads := tpRun(t, zb)
				if svg, err := os.ReadFile(zb.ProfileSchedule); err != nil || !strings.Contains(string(svg), ">weight gradients<") {
					t.Errorf("%s: no weight-gradient step in the timeline (%v)", sched, err)
				}
				if c.name == "pp2-dp2-zero3" {
					// Megatron-FSDP reduce-scatters a unit's gradient as
					// its W's land: W's put off arrive together and are
					// reduced in one sum (as ZB-H1's).
					checkEquivalent(t, gotLoss, gotGrads, wantLoss, wantGrads, 1e-6, 1e-5)
					continue
				}
				for i := range wantLoss {
					if math.Float64bits(gotLoss[i]) != math.Float64bits(wantLoss[i]) {
						t.Fatalf("%s: loss %d: %.9g, interleaved %.9g", sched, i, gotLoss[i], wantLoss[i])
					}
				}
				sameTensors(t, wantGrads, gotGrads)
			}
		})
	}
}

// TestVScheduleMicrobatches: the V schedules take the microbatch counts
// their own rules allow, not the interleaved schedule's group rule
// (ZB-V 3 microbatches on 4 ranks, DualPipeV 9), and DualPipeV refuses
// fewer than 2P in one line naming the flag.
func TestVScheduleMicrobatches(t *testing.T) {
	for _, c := range []struct {
		sched string
		m     int
		want  string
	}{{"zb-v", 3, ""}, {"dualpipev", 9, ""}, {"dualpipev", 7, "--pipeline-schedule dualpipev needs at least 2·pipeline_model_parallel_size = 8 microbatches"}} {
		a := ppArgs(4, 1, 4)
		a.Model.NumLayers, a.Model.VirtualPipelineModelParallelSize = 8, 2
		a.PipelineSchedule, a.GlobalBatchSize = c.sched, c.m*a.MicroBatchSize
		err := normalise(a, 4).Validate(4)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s with %d microbatches: %v", c.sched, c.m, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s with %d microbatches: %v, want %q", c.sched, c.m, err, c.want)
		}
	}
}
