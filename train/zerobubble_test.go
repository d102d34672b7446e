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
