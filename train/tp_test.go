package train

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/internal/numtest"
)

// tpArgs is a small GPT on mock data whose vocabulary (100) is padded
// differently by every TP size (128, 256, 512), trained 20 steps with two
// accumulated micro-batches per data-parallel rank, no dropout.
func tpArgs(world, tp int) Args {
	a := DefaultArgs()
	a.WorldSize = world
	a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads = 2, 32, 4
	a.Model.SeqLength, a.Model.VocabSize = 16, 100
	a.Model.HiddenDropout, a.Model.AttentionDropout = 0, 0
	a.Model.TensorModelParallelSize = tp
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 2, 8, 20
	a.LR, a.LRWarmupIters, a.WeightDecay = 3e-3, 2, 0.1
	a.MockData, a.EvalIters = true, 2
	return a
}

// mustRun trains a and returns its result, failing the test on an error.
func mustRun(t *testing.T, a Args) *Result {
	t.Helper()
	r, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tpRun trains a and returns its losses (the training losses, then the
// final validation loss) and its first step's gradients, gathered to whole
// tensors.
func tpRun(t *testing.T, a Args) ([]float64, *safetensors.File) {
	t.Helper()
	res, g := runDumpingGrads(t, a)
	return append(res.Losses, res.ValidLoss), g
}

// runDumpingGrads trains a and returns its result and its first step's
// gradients, gathered to whole tensors.
func runDumpingGrads(t *testing.T, a Args) (*Result, *safetensors.File) {
	t.Helper()
	a.DumpGrads = filepath.Join(t.TempDir(), "grads.safetensors")
	res := mustRun(t, a)
	g, err := safetensors.ReadFile(a.DumpGrads)
	if err != nil {
		t.Fatal(err)
	}
	return res, g
}

// TestTensorParallelMatchesSingleRank is the tensor- and sequence-parallel
// layout-equivalence test: for TP 2 and 4, each with and without sequence
// parallelism and with no, full and selective recompute (and TP2 × DP2),
// the 20-step loss curve and the final validation loss equal the one-rank
// ones to 1e-5 relative, and
// the first step's gradients, gathered to whole tensors, equal the one-rank
// gradients to 1e-5 (‖g − g₁‖/‖g₁‖ per parameter).
func TestTensorParallelMatchesSingleRank(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, tpArgs(1, 1))
	type layout struct {
		world, tp int
		sp        bool
		recompute string
	}
	var layouts []layout
	for _, tp := range []int{2, 4} {
		for _, sp := range []bool{false, true} {
			for _, rc := range []string{"", "full", "selective"} {
				layouts = append(layouts, layout{tp, tp, sp, rc})
			}
		}
	}
	layouts = append(layouts, layout{4, 2, true, ""}, layout{4, 2, false, "full"})
	for _, l := range layouts {
		name := fmt.Sprintf("world%d/tp%d/sp=%v/recompute=%q", l.world, l.tp, l.sp, l.recompute)
		t.Run(name, func(t *testing.T) {
			a := tpArgs(l.world, l.tp)
			a.Model.SequenceParallel = l.sp
			setRecompute(&a, l.recompute)
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-5, 1e-5)
		})
	}
}

// setRecompute sets a's recompute: "full" (uniform, one layer per chunk),
// "selective" or "" (none).
func setRecompute(a *Args, kind string) {
	switch kind {
	case "full":
		a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "uniform", 1
	case "selective":
		a.Model.RecomputeGranularity = "selective"
	}
}

// checkEquivalent compares a run's losses (the training losses, then the
// validation loss) and whole first-step gradients with the one-rank ones:
// every loss to lossTol relative, every gradient to gradTol
// (‖g − g₁‖/‖g₁‖ per parameter). It logs the largest differences.
func checkEquivalent(t *testing.T, losses []float64, grads *safetensors.File, wantLoss []float64, wantGrads *safetensors.File, lossTol, gradTol float64) {
	t.Helper()
	worstLoss := 0.0
	for i := range wantLoss {
		e := relErr(losses[i], wantLoss[i])
		worstLoss = math.Max(worstLoss, e)
		if e > lossTol {
			t.Errorf("%s: loss %.9f, one rank %.9f (relative difference %.2g > %g)", lossLabel(i, len(wantLoss)), losses[i], wantLoss[i], e, lossTol)
		}
	}
	if len(grads.Tensors) != len(wantGrads.Tensors) {
		t.Errorf("%d gradient tensors, one rank has %d", len(grads.Tensors), len(wantGrads.Tensors))
	}
	worstGrad := 0.0
	gradDiffs(t, grads, wantGrads, func(name string, e float64) {
		worstGrad = math.Max(worstGrad, e)
		if e > gradTol {
			t.Errorf("%s: ‖g − g₁‖/‖g₁‖ = %.2g > %g", name, e, gradTol)
		}
	})
	t.Logf("largest relative differences from one rank: loss %.2g, gradient %.2g", worstLoss, worstGrad)
}

// gradDiffs calls f with ‖g − g₁‖/‖g₁‖ for each parameter of want, g from
// grads; a parameter grads lacks, or of another size, fails the test.
func gradDiffs(t *testing.T, grads, want *safetensors.File, f func(name string, e float64)) {
	t.Helper()
	for _, w := range want.Tensors {
		g, ok := grads.Get(w.Name)
		if !ok {
			t.Fatalf("no gradient for %s", w.Name)
		}
		gv, err := g.Float32()
		if err != nil {
			t.Fatal(err)
		}
		wv, _ := w.Float32()
		if len(gv) != len(wv) {
			t.Fatalf("%s: %d elements, one rank has %d", w.Name, len(gv), len(wv))
		}
		f(w.Name, numtest.RelNorm(gv, wv))
	}
}

// lossLabel names entry i of a tpRun loss list of n entries.
func lossLabel(i, n int) string {
	if i == n-1 {
		return "validation"
	}
	return fmt.Sprintf("step %d", i+1)
}

// TestRecomputeReplaysDropout: with dropout on, full recompute (uniform and
// block, with and without distributed saved activations) and selective
// recompute replay the generators exactly, so the loss curve is bitwise
// that of the run that keeps every activation, on one rank and on TP 2 with
// and without sequence parallelism.
func TestRecomputeReplaysDropout(t *testing.T) {
	type variant struct {
		granularity, method string
		layers              int
		distribute          bool
	}
	variants := []variant{
		{"full", "uniform", 2, false}, {"full", "block", 1, false}, {"selective", "", 0, false},
		{"full", "uniform", 1, true},
	}
	for _, base := range []struct {
		world, tp int
		sp        bool
	}{{1, 1, false}, {2, 2, false}, {2, 2, true}} {
		a := tpArgs(base.world, base.tp)
		a.TrainIters = 6
		a.Model.SequenceParallel = base.sp
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		want, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			if v.distribute && (base.sp || base.tp == 1) {
				continue // distributing needs TP without SP
			}
			t.Run(fmt.Sprintf("tp%d/sp=%v/%s-%s-%d/distribute=%v", base.tp, base.sp, v.granularity, v.method, v.layers, v.distribute), func(t *testing.T) {
				b := a
				b.Model.RecomputeGranularity, b.Model.RecomputeMethod, b.Model.RecomputeNumLayers = v.granularity, v.method, v.layers
				b.Model.DistributeSavedActivations = v.distribute
				got, err := Run(context.Background(), b, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range want.Losses {
					if got.Losses[i] != want.Losses[i] {
						t.Fatalf("step %d: loss %.9g with recompute, %.9g without (must be bitwise equal)", i+1, got.Losses[i], want.Losses[i])
					}
				}
			})
		}
	}
}

// TestTensorParallelResume: a TP 2 + SP run with dropout stopped at
// iteration 5 and resumed from its checkpoint continues bit for bit; and
// because checkpoints hold whole tensors, a checkpoint written at TP 2 + SP
// resumes at TP 4 and at one rank with the loss curve of the uninterrupted
// run to 1e-5 (no dropout: the streams of different layouts differ).
func TestTensorParallelResume(t *testing.T) {
	for _, dropout := range []float32{0.1, 0} {
		a := tpArgs(2, 2)
		a.Model.SequenceParallel = true
		a.TrainIters = 10
		a.Model.HiddenDropout, a.Model.AttentionDropout = dropout, dropout
		full := mustRun(t, a)
		dir := t.TempDir()
		first := a
		first.TrainIters, first.LRDecayIters, first.Save = 5, 10, dir
		a.LRDecayIters = 10
		mustRun(t, first)
		targets := []Args{a}
		if dropout == 0 {
			tp4 := a
			tp4.WorldSize, tp4.Model.TensorModelParallelSize = 4, 4
			one := a
			one.WorldSize, one.Model.TensorModelParallelSize, one.Model.SequenceParallel = 1, 1, false
			targets = append(targets, tp4, one)
		}
		for _, b := range targets {
			b.Load = dir
			res := mustRun(t, b)
			if res.StartIteration != 5 || len(res.Losses) != 5 {
				t.Fatalf("resumed at %d with %d losses, want 5 and 5", res.StartIteration, len(res.Losses))
			}
			for i, l := range res.Losses {
				want := full.Losses[5+i]
				if b.Model.TensorModelParallelSize == 2 && l != want || relErr(l, want) > 1e-5 {
					t.Errorf("dropout %g, resumed at TP %d: iteration %d loss %.9f, uninterrupted TP 2 %.9f", dropout, b.Model.TensorModelParallelSize, 6+i, l, want)
				}
			}
		}
	}
}

// TestVocabPaddingChangesNothing: the same model without padding (V = 100)
// and padded to 128 (one rank) or 512 (TP 4 with make_vocab_size_divisible_by
// 128) has the same loss curve and gradients of real tokens to 1e-5: padded
// logits are excluded from the softmax, padded rows never looked up.
func TestVocabPaddingChangesNothing(t *testing.T) {
	a := tpArgs(1, 1)
	a.Model.MakeVocabSizeDivisibleBy = 1
	wantLoss, wantGrads := tpRun(t, a)
	for _, b := range []Args{tpArgs(1, 1), tpArgs(4, 4)} {
		losses, grads := tpRun(t, b)
		for i := range wantLoss {
			if e := relErr(losses[i], wantLoss[i]); e > 1e-5 {
				t.Errorf("padded to %d: %s loss %.9f, unpadded %.9f", b.Model.PaddedVocabSize(), lossLabel(i, len(wantLoss)), losses[i], wantLoss[i])
			}
		}
		for _, w := range wantGrads.Tensors {
			g, _ := grads.Get(w.Name)
			gv, _ := g.Float32()
			wv, _ := w.Float32()
			if e := numtest.RelNorm(gv, wv); e > 1e-5 {
				t.Errorf("padded to %d: %s gradient differs by %.2g", b.Model.PaddedVocabSize(), w.Name, e)
			}
		}
	}
}

// trainCheckingReplicas trains a on in-process ranks as Run does and then
// checks that every parameter the tensor-parallel ranks replicate (layer
// norms, position embedding, row-parallel biases) is bitwise equal on all
// of them: replicated activations must draw the same dropout masks, and
// sequence-parallel gradients must be summed.
func trainCheckingReplicas(t *testing.T, a Args) {
	t.Helper()
	a = normalise(a, a.WorldSize)
	if err := a.Validate(a.WorldSize); err != nil {
		t.Fatal(err)
	}
	ds, err := openData(a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = local.NewWorld(a.WorldSize, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		tr, err := newTrainer(ctx, g, a, ds, a.WorldSize, nil)
		if err != nil {
			return err
		}
		for tr.iteration < a.TrainIters {
			if _, err := tr.step(ctx); err != nil {
				return err
			}
		}
		n := tr.tp.Size()
		for _, p := range tr.params {
			if p.TensorModelParallel {
				continue
			}
			all := make([]float32, n*p.Value.Len())
			if err := tr.tp.AllGather(ctx, comm.F32(all), comm.F32(p.Value.Data())); err != nil {
				return err
			}
			for r := 1; r < n; r++ {
				for i := range p.Value.Data() {
					if o := all[r*p.Value.Len()+i]; math.Float32bits(o) != math.Float32bits(all[i]) {
						return fmt.Errorf("%s differs between tensor-parallel ranks 0 and %d at element %d: %v and %v (after iteration %d)", p.Name, r, i, all[i], o, tr.iteration)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReplicatedParametersStayEqual: with dropout on, the parameters every
// TP rank holds whole stay bitwise equal across the TP group — with and
// without sequence parallelism and recompute, and after resuming at another
// layout (a TP 1, a DP 2 and a TP 2 checkpoint resumed at TP 2 × DP 2).
func TestReplicatedParametersStayEqual(t *testing.T) {
	dropout := func(a Args) Args {
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		a.TrainIters = 6
		return a
	}
	for _, sp := range []bool{false, true} {
		a := dropout(tpArgs(4, 2))
		a.Model.SequenceParallel = sp
		trainCheckingReplicas(t, a)
		a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "uniform", 1
		trainCheckingReplicas(t, a)
	}
	for _, from := range []struct{ world, tp int }{{1, 1}, {2, 1}, {2, 2}} {
		dir := t.TempDir()
		first := dropout(tpArgs(from.world, from.tp))
		first.TrainIters, first.Save = 3, dir
		if _, err := Run(context.Background(), first, Options{}); err != nil {
			t.Fatal(err)
		}
		resumed := dropout(tpArgs(4, 2))
		resumed.Load = dir
		trainCheckingReplicas(t, resumed)
	}
}
