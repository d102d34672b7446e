package train

import (
	"context"
	"fmt"
	"testing"
)

// dropoutLayouts are the parallel layouts the dropout tests train on, each
// changing one dimension of mockArgs' one rank.
var dropoutLayouts = []struct {
	name string
	set  func(*Args)
}{
	{"micro-batch 2", func(a *Args) { a.MicroBatchSize = 2 }},
	{"dp2", func(a *Args) { a.WorldSize = 2 }},
	{"dp2-micro-batch 2-distopt", func(a *Args) { a.WorldSize, a.MicroBatchSize, a.DDP.UseDistributedOptimizer = 2, 2, true }},
	{"tp2", func(a *Args) { a.WorldSize, a.Model.TensorModelParallelSize = 2, 2 }},
	{"tp2-sp", func(a *Args) {
		a.WorldSize, a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, 2, true
	}},
	{"pp2", func(a *Args) { a.WorldSize, a.Model.PipelineModelParallelSize = 2, 2 }},
	{"cp2", func(a *Args) { a.WorldSize, a.Model.ContextParallelSize = 2, 2 }},
	{"cp2-a2a", func(a *Args) { a.WorldSize, a.Model.ContextParallelSize, a.Model.CPCommType = 2, 2, []string{"a2a"} }},
	{"selective recompute", func(a *Args) { a.Model.RecomputeGranularity = "selective" }},
	{"full recompute", func(a *Args) {
		a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "uniform", 1
	}},
	{"tp2-sp-cp2-pp2", func(a *Args) {
		a.WorldSize, a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 8, 2, true
		a.Model.ContextParallelSize, a.Model.PipelineModelParallelSize = 2, 2
	}},
}

// TestDropoutMatchesSingleRank trains 20 iterations with hidden and
// attention dropout 0.1 on one rank and under each of dropoutLayouts: the
// counter-based masks are one rank's whatever the layout, so every loss
// (and the validation loss) equals the one rank's to 1e-6 relative and the
// first step's gradients, gathered whole, to 1e-5. The losses differ from
// those without dropout.
func TestDropoutMatchesSingleRank(t *testing.T) {
	args := func() Args {
		a := mockArgs(20)
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		a.EvalIters = 1
		return a
	}
	wantLoss, wantGrads := tpRun(t, args())
	plain, _ := tpRun(t, mockArgs(20))
	if fmt.Sprint(plain[:20]) == fmt.Sprint(wantLoss[:20]) {
		t.Fatal("dropout 0.1 changed no loss")
	}
	for _, l := range dropoutLayouts {
		t.Run(l.name, func(t *testing.T) {
			a := args()
			l.set(&a)
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}

// TestDropoutSchedulesAndModelsMatchSingleRank: with dropout 0.1 the
// pipeline schedules that run the stages in other orders (interleaved,
// ZB-V, DualPipeV) give one rank's losses, and so do MoE layers under
// expert parallelism and MTP depths under TP and PP, each to 1e-6
// relative.
func TestDropoutSchedulesAndModelsMatchSingleRank(t *testing.T) {
	withDropout := func(a Args) Args {
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		a.TrainIters = 4
		return a
	}
	for _, c := range []struct {
		name   string
		base   func() Args
		layout func(*Args)
	}{
		{"pp2-vpp2", func() Args { return ppArgs(1, 1, 1) }, func(a *Args) {
			a.WorldSize, a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 2, 2, 2
		}},
		{"zb-v", func() Args { return ppArgs(1, 1, 1) }, func(a *Args) {
			a.WorldSize, a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize, a.PipelineSchedule = 2, 2, 2, "zb-v"
		}},
		{"dualpipev", func() Args { return ppArgs(1, 1, 1) }, func(a *Args) {
			a.WorldSize, a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize, a.PipelineSchedule = 2, 2, 2, "dualpipev"
		}},
		{"moe-ep2", func() Args { return moeArgs(1) }, func(a *Args) {
			a.WorldSize, a.Model.ExpertModelParallelSize = 2, 2
		}},
		{"mtp-tp2-sp", func() Args { return mtpArgs(1) }, func(a *Args) {
			a.WorldSize, a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, 2, true
		}},
	} {
		want, err := Run(context.Background(), withDropout(c.base()), Options{})
		if err != nil {
			t.Fatalf("%s: one rank: %v", c.name, err)
		}
		a := withDropout(c.base())
		c.layout(&a)
		got, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range want.Losses {
			if e := relErr(got.Losses[i], want.Losses[i]); e > 1e-6 {
				t.Errorf("%s: iteration %d: loss %.9g, one rank %.9g (relative %.2g)", c.name, i+1, got.Losses[i], want.Losses[i], e)
			}
		}
	}
}

// TestVSchedulesWithDropoutAreInterleaved: with dropout 0.1, ZB-V and
// DualPipeV give the interleaved 1F1B's losses on the same stages bit for
// bit, as without dropout: the masks do not follow the order a rank runs
// its forwards in.
func TestVSchedulesWithDropoutAreInterleaved(t *testing.T) {
	var want string
	for _, s := range []string{"", "zb-v", "dualpipev"} {
		a := ppArgs(2, 1, 2)
		a.Model.VirtualPipelineModelParallelSize, a.PipelineSchedule = 2, s
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		a.TrainIters = 4
		res, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := fmt.Sprint(res.Losses); s == "" {
			want = got
		} else if got != want {
			t.Errorf("%s: losses %s, interleaved %s", s, got, want)
		}
	}
}

// TestDropoutResumeUnderAnotherLayout: with dropout 0.1, a run saved at
// iteration 3 on one rank and resumed under TP 2 + SP × DP 2 continues the
// uninterrupted one-rank curve to 1e-6 relative: the masks depend on the
// samples consumed, not on generator states a layout carries.
func TestDropoutResumeUnderAnotherLayout(t *testing.T) {
	args := func() Args {
		a := mockArgs(6)
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		return a
	}
	full, err := Run(context.Background(), args(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := args()
	first.Save, first.ExitInterval = t.TempDir(), 3
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	rest := args()
	rest.Load, rest.WorldSize, rest.Model.TensorModelParallelSize, rest.Model.SequenceParallel = first.Save, 4, 2, true
	res, err := Run(context.Background(), rest, Options{})
	if err != nil || res.StartIteration != 3 {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	for i, l := range res.Losses {
		if e := relErr(l, full.Losses[3+i]); e > 1e-6 {
			t.Errorf("iteration %d: loss %.9g, uninterrupted one rank %.9g (relative %.2g)", 4+i, l, full.Losses[3+i], e)
		}
	}
}
