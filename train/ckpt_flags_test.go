package train

import (
	"context"
	"strings"
	"testing"
)

// TestCheckpointFlags: --no-save-optim leaves the moments out (and a
// plain resume from it says to pass --no-load-optim); --no-load-optim
// and --finetune resume the weights with a fresh Adam (step 0), --finetune
// at iteration 0 and with another global batch; --ckpt-step loads an
// earlier iteration; --use-checkpoint-args takes the model's shape.
func TestCheckpointFlags(t *testing.T) {
	run := func(a Args) (*Result, error) { return Run(context.Background(), a, Options{}) }
	dir := t.TempDir()
	a := mockArgs(4)
	a.Save, a.SaveInterval = dir, 2
	if _, err := run(a); err != nil {
		t.Fatal(err)
	}
	noOpt := t.TempDir()
	b := mockArgs(3)
	b.Save, b.NoSaveOptim, b.NoSaveRNG = noOpt, true, true
	if _, err := run(b); err != nil {
		t.Fatal(err)
	}
	resume := mockArgs(5)
	resume.Load = noOpt
	if _, err := run(resume); err == nil || !strings.Contains(err.Error(), "--no-load-optim") {
		t.Fatalf("resume without the optimizer state: %v", err)
	}
	resume.NoLoadOptim = true
	res, err := run(resume)
	if err != nil || res.StartIteration != 3 {
		t.Fatalf("--no-load-optim: %v, %v", res, err)
	}

	ft := mockArgs(3)
	ft.Load, ft.Finetune, ft.GlobalBatchSize = dir, true, 4
	res, err = run(ft)
	if err != nil || res.StartIteration != 0 || len(res.Losses) != 3 {
		t.Fatalf("--finetune: %+v, %v", res, err)
	}
	// The first finetuning loss is the saved model's on the first batch:
	// lower than a fresh model's.
	fresh, err := run(func() Args { f := mockArgs(3); f.GlobalBatchSize = 4; return f }())
	if err != nil || res.Losses[0] >= fresh.Losses[0] {
		t.Errorf("--finetune's first loss %.4f, a fresh model's %.4f: the weights were not loaded (%v)", res.Losses[0], fresh.Losses[0], err)
	}

	step := mockArgs(4)
	step.Load, step.CkptStep = dir, 2
	res, err = run(step)
	if err != nil || res.StartIteration != 2 {
		t.Fatalf("--ckpt-step 2: %+v, %v", res, err)
	}
	step.CkptStep = 3
	if _, err := run(step); err == nil || !strings.Contains(err.Error(), "no iteration 3") {
		t.Fatalf("--ckpt-step 3 (not saved): %v", err)
	}

	use := mockArgs(6)
	use.Load, use.UseCheckpointArgs = dir, true
	use.OverrideOptParamScheduler = true              // the decay follows --train-iters
	use.Model.NumLayers, use.Model.HiddenSize = 7, 48 // overridden
	res, err = run(use)
	if err != nil || res.StartIteration != 4 {
		t.Fatalf("--use-checkpoint-args: %+v, %v", res, err)
	}
	bad := mockArgs(3)
	bad.Finetune = true
	if _, err := run(bad); err == nil || !strings.Contains(err.Error(), "--finetune says how to load a checkpoint") {
		t.Fatalf("--finetune without --load: %v", err)
	}
	bad = mockArgs(3)
	bad.AsyncSave, bad.NoSaveRNG = true, true
	if _, err := run(bad); err == nil || !strings.Contains(err.Error(), "--async-save says how checkpoints are written, and --save is not given") ||
		!strings.Contains(err.Error(), "--no-save-optim/--no-save-rng say what a checkpoint leaves out") {
		t.Fatalf("--async-save and --no-save-rng without --save: %v", err)
	}
}

// TestUseCheckpointArgsTellsNoFalseDataChange: --use-checkpoint-args takes
// the sequence length from the checkpoint before the data settings are
// compared, so the start-up line tells no change of it.
func TestUseCheckpointArgsTellsNoFalseDataChange(t *testing.T) {
	a := mockArgs(2)
	a.Save, a.LRWarmupIters = t.TempDir(), 0
	mustRun(t, a)
	b := mockArgs(2)
	b.Load, b.UseCheckpointArgs, b.LRWarmupIters = a.Save, true, 0
	b.Model.SeqLength, b.Model.NumLayers = 0, 0 // from the checkpoint
	var out strings.Builder
	if _, err := Run(context.Background(), b, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "data settings differ") {
		t.Errorf("a change of the data told:\n%s", out.String())
	}
}

// TestExitOnMissingCheckpoint: with --exit-on-missing-checkpoint a --load
// that is also --save and holds no checkpoint is refused, where it would
// start from scratch.
func TestExitOnMissingCheckpoint(t *testing.T) {
	a := mockArgs(2)
	a.Save, a.LRWarmupIters = t.TempDir(), 0
	a.Load, a.ExitOnMissingCheckpoint = a.Save, true
	if _, err := Run(context.Background(), a, Options{}); err == nil || !strings.Contains(err.Error(), "--exit-on-missing-checkpoint") {
		t.Errorf("an empty --load: %v", err)
	}
	a.ExitOnMissingCheckpoint = false
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Errorf("without the flag: %v", err)
	}
}
