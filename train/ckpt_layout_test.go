package train

import (
	"testing"

	"github.com/gotron/gotron/ckpt"
)

// TestCheckpointAcrossLayouts is the demonstration: save at TP 2
// × PP 2 × DP 2 with the distributed optimizer (8 in-process ranks) after 5
// iterations, then load at TP 1 × PP 1, TP 4, PP 4 and DP 4 without it,
// and at the saving layout: the next 10 losses equal, to 1e-6 relative,
// those of an uninterrupted run at the loading layout (bit for bit at the
// saving layout).
func TestCheckpointAcrossLayouts(t *testing.T) {
	base := tpArgs(1, 1)
	base.Model.NumLayers = 4
	base.MicroBatchSize, base.GlobalBatchSize, base.TrainIters, base.LRDecayIters = 1, 8, 15, 15
	base.EvalIters = 0
	layout := func(world, tp, pp int, distOpt bool) Args {
		a := base
		a.WorldSize, a.Model.TensorModelParallelSize, a.Model.PipelineModelParallelSize = world, tp, pp
		a.DDP.UseDistributedOptimizer = distOpt
		return a
	}
	saving := layout(8, 2, 2, true)
	dir := t.TempDir()
	first := saving
	first.TrainIters, first.Save = 5, dir
	mustRun(t, first)
	r, err := ckpt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	// TP 2 × PP 2 ranks of the first optimizer instance, each of the two
	// data-parallel ranks with its shard: 8 files.
	if n := len(r.Manifest.Shards); n != 8 {
		t.Fatalf("%d shards, want 8", n)
	}
	for _, c := range []struct {
		name  string
		a     Args
		exact bool
	}{
		{"same layout", saving, true},
		{"TP1 PP1", layout(1, 1, 1, false), false},
		{"TP4", layout(4, 4, 1, false), false},
		{"PP4", layout(4, 1, 4, false), false},
		{"DP4", layout(4, 1, 1, false), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := mustRun(t, c.a)
			b := c.a
			b.Load = dir
			res := mustRun(t, b)
			if res.StartIteration != 5 || len(res.Losses) != 10 {
				t.Fatalf("resumed at %d with %d losses, want 5 and 10", res.StartIteration, len(res.Losses))
			}
			worst := 0.0
			for i, l := range res.Losses {
				want := full.Losses[5+i]
				worst = max(worst, relErr(l, want))
				if c.exact && l != want || relErr(l, want) > 1e-6 {
					t.Errorf("iteration %d: resumed %.9f, uninterrupted %.9f (relative %.2g)", 6+i, l, want, relErr(l, want))
				}
			}
			t.Logf("largest relative difference %.2g", worst)
		})
	}
}
