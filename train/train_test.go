package train

import (
	"context"
	"math"
	"testing"

	"github.com/gotron/gotron/internal/gptref"
)

// The fixture in testdata/gpt_ref comes from an independent PyTorch model
// (tools/torchref). Regenerate it with
//
//	/usr/bin/python3 tools/torchref/gpt_ref.py --out testdata/gpt_ref
//
// fixtureArgs returns the arguments that reproduce the fixture's run, and
// PyTorch's losses and gradient norms.
func fixtureArgs(t *testing.T, name string) (Args, []float64, []float64) {
	t.Helper()
	f, err := gptref.Load("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	fc := f.Config
	a := DefaultArgs()
	a.Model = fc.Model()
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = fc.MicroBatchSize, fc.GlobalBatchSize, fc.TrainIters
	a.Seed, a.LR, a.LRDecayStyle = fc.Seed, fc.LR, "constant"
	a.AdamBeta1, a.AdamBeta2, a.AdamEps, a.WeightDecay, a.ClipGrad = fc.AdamBeta1, fc.AdamBeta2, fc.AdamEps, fc.WeightDecay, fc.ClipGrad
	a.MockData = true
	a.EvalIters = 0
	a.LoadInit = f.Init()
	return a, f.Losses.Losses, f.Losses.GradNorms
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }

// TestLossesMatchPyTorch trains each fixture's 10 steps (two accumulated
// micro-batches, AdamW with weight decay 0.1 on 2-d weights, clipping at
// 1.0) from the fixture's initial weights and compares every loss with
// PyTorch's to 1e-6 relative, and every pre-clip gradient norm to 1e-5.
func TestLossesMatchPyTorch(t *testing.T) {
	for _, name := range gptref.Fixtures {
		t.Run(name, func(t *testing.T) { testLossesMatchPyTorch(t, name) })
	}
}

func testLossesMatchPyTorch(t *testing.T, name string) {
	a, want, wantNorms := fixtureArgs(t, name)
	res, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Losses) != len(want) {
		t.Fatalf("%d losses, want %d", len(res.Losses), len(want))
	}
	worst, worstNorm := 0.0, 0.0
	for i := range want {
		e := relErr(res.Losses[i], want[i])
		worst = math.Max(worst, e)
		if e > 1e-6 {
			t.Errorf("step %d: loss %.9f, PyTorch %.9f (relative error %.2g > 1e-6)", i, res.Losses[i], want[i], e)
		}
		e = relErr(res.GradNorms[i], wantNorms[i])
		worstNorm = math.Max(worstNorm, e)
		if e > 1e-5 {
			t.Errorf("step %d: grad norm %.7f, PyTorch %.7f (relative error %.2g > 1e-5)", i, res.GradNorms[i], wantNorms[i], e)
		}
	}
	t.Logf("largest relative differences from PyTorch over %d steps: loss %.3g, grad norm %.3g", len(want), worst, worstNorm)
	checkMTPLosses(t, name, res.MTPLosses)
}

// mockArgs is a small mock-data run.
func mockArgs(iters int) Args {
	a := DefaultArgs()
	a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads = 2, 32, 4
	a.Model.SeqLength, a.Model.VocabSize = 16, 64
	a.Model.HiddenDropout, a.Model.AttentionDropout = 0, 0
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 1, 8, iters
	a.LR, a.LRWarmupIters, a.LRDecayStyle, a.MinLR = 3e-3, 2, "cosine", 3e-4
	a.MockData = true
	a.EvalIters = 0
	return a
}

// TestDataParallelMatchesSingleRank trains 20 steps of the same global
// batch on 1, 2 and 4 data-parallel ranks: every loss must equal the
// single-rank loss to 1e-6 relative.
func TestDataParallelMatchesSingleRank(t *testing.T) {
	ref, err := Run(context.Background(), mockArgs(20), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, world := range []int{2, 4} {
		for _, avg := range []bool{false, true} {
			a := mockArgs(20)
			a.WorldSize = world
			a.DDP.AverageInCollective = avg
			res, err := Run(context.Background(), a, Options{})
			if err != nil {
				t.Fatalf("world %d: %v", world, err)
			}
			for i := range ref.Losses {
				if e := relErr(res.Losses[i], ref.Losses[i]); e > 1e-6 {
					t.Errorf("world %d (average_in_collective=%v), step %d: loss %.9f, single rank %.9f (relative error %.2g > 1e-6)", world, avg, i, res.Losses[i], ref.Losses[i], e)
				}
			}
		}
	}
	if ref.Losses[len(ref.Losses)-1] >= ref.Losses[0] {
		t.Errorf("the loss did not fall over 20 steps: %.4f → %.4f", ref.Losses[0], ref.Losses[len(ref.Losses)-1])
	}
}

// TestResumeReproducesLosses stops a run with dropout at iteration 5,
// resumes it from the checkpoint, and checks that iterations 6..10 give
// bitwise the losses of a run that never stopped (weights, Adam moments,
// step count, data position and dropout generator all restored).
func TestResumeReproducesLosses(t *testing.T) {
	for _, world := range []int{1, 2} {
		a := mockArgs(10)
		a.WorldSize = world
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		full, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		first := a
		first.TrainIters, first.Save = 5, dir
		first.LRDecayIters = 10
		a.LRDecayIters = 10
		if _, err := Run(context.Background(), first, Options{}); err != nil {
			t.Fatal(err)
		}
		second := a
		second.Load = dir
		res, err := Run(context.Background(), second, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.StartIteration != 5 || len(res.Losses) != 5 {
			t.Fatalf("world %d: resumed at %d with %d losses, want 5 and 5", world, res.StartIteration, len(res.Losses))
		}
		for i, l := range res.Losses {
			if l != full.Losses[5+i] {
				t.Errorf("world %d, iteration %d: resumed loss %.9f, uninterrupted %.9f", world, 6+i, l, full.Losses[5+i])
			}
		}
	}
}

// checkMTPLosses compares every step's MTP depth losses with the
// fixture's to 1e-6 relative (none without MTP).
func checkMTPLosses(t *testing.T, name string, got [][]float64) {
	t.Helper()
	f, err := gptref.Load("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	want := f.Losses.MTPLosses
	if len(got) != len(want) {
		t.Fatalf("%d steps of MTP losses, PyTorch %d", len(got), len(want))
	}
	for i := range want {
		for k := range want[i] {
			if k >= len(got[i]) || relErr(got[i][k], want[i][k]) > 1e-6 {
				t.Errorf("step %d, depth %d: MTP losses %v, PyTorch %v", i, k+1, got[i], want[i])
				break
			}
		}
	}
}

// TestXavierInitLayouts: --init-method-xavier-uniform draws each whole
// weight as one rank does, so TP 2 with SP and PP 2 follow the one-rank
// loss curve to 1e-6, and the curve is not the normal init's.
func TestXavierInitLayouts(t *testing.T) {
	xavier := func(world int, set func(a *Args)) []float64 {
		a := ppArgs(world, 1, 1)
		a.TrainIters, a.Model.InitMethodXavierUniform = 6, true
		set(&a)
		return mustRun(t, a).Losses
	}
	want := xavier(1, func(*Args) {})
	for name, set := range map[string]func(a *Args){
		"tp2-sp": func(a *Args) { a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true },
		"pp2":    func(a *Args) { a.Model.PipelineModelParallelSize = 2 },
	} {
		got := xavier(2, set)
		for i := range want {
			if e := relErr(got[i], want[i]); e > 1e-6 {
				t.Errorf("%s, step %d: loss %.9f, one rank %.9f", name, i+1, got[i], want[i])
			}
		}
	}
	normal := ppArgs(1, 1, 1)
	normal.TrainIters = 6
	if mustRun(t, normal).Losses[0] == want[0] {
		t.Error("the Xavier init's first loss is the normal init's")
	}
}
