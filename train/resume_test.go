package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt"
)

// TestSaveAndLoadSameEmptyDirStartsFromScratch: --save D --load D on a
// missing or empty D trains from scratch with a log line (Megatron's
// behaviour), and the next run with the same flags resumes. A --load that
// is not --save and holds nothing stays an error.
func TestSaveAndLoadSameEmptyDirStartsFromScratch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	a := mockArgs(3)
	a.Save, a.Load = dir, dir+"/"
	var out bytes.Buffer
	res, err := Run(context.Background(), a, Options{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.StartIteration != 0 || !strings.Contains(out.String(), "holds no checkpoint yet (it is also --save): starting from scratch") {
		t.Fatalf("start %d, log:\n%s", res.StartIteration, out.String())
	}
	a.TrainIters, a.OverrideOptParamScheduler = 4, true // the decay follows --train-iters
	res, err = Run(context.Background(), a, Options{})
	if err != nil || res.StartIteration != 3 {
		t.Fatalf("second run: start %v, %v; want a resume at 3", res, err)
	}
	b := mockArgs(3)
	b.Load = filepath.Join(t.TempDir(), "typo")
	if _, err := Run(context.Background(), b, Options{}); err == nil || !strings.Contains(err.Error(), "holds no gotron checkpoint") {
		t.Errorf("--load without a checkpoint and without --save: %v", err)
	}
}

// TestResumeRefusesEveryDifferentSetting: the checkpoint saved with
// 4 heads resumed with 8; now every differing model setting is listed in
// one error.
func TestResumeRefusesEveryDifferentSetting(t *testing.T) {
	dir := t.TempDir()
	a := mockArgs(3)
	a.Save = dir
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatal(err)
	}
	b := mockArgs(4)
	b.Load = dir
	b.Model.NumAttentionHeads = 8
	b.Model.FFNHiddenSize = 64
	b.GlobalBatchSize = 4
	_, err := Run(context.Background(), b, Options{})
	if err == nil {
		t.Fatal("resumed with other settings")
	}
	for _, w := range []string{"--num-attention-heads 4 in the checkpoint, 8 in this run", "--ffn-hidden-size 128 in the checkpoint, 64 in this run",
		"--global-batch-size 8 in the checkpoint, 4 in this run", "iteration 3"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
}

// TestResumeLongerSequenceSaysWhy: a longer --seq-length on resume, with
// --max-position-embeddings not given, is refused naming the position
// table's size and the flags that keep it.
func TestResumeLongerSequenceSaysWhy(t *testing.T) {
	a := mockArgs(3)
	a.Save = t.TempDir()
	mustRun(t, a)
	b := mockArgs(3)
	b.Load, b.Model.SeqLength = a.Save, 32
	_, err := Run(context.Background(), b, Options{})
	if err == nil || !strings.Contains(err.Error(), "the checkpoint's position table has 16 rows: pass --max-position-embeddings 16 and a --seq-length of at most 16") {
		t.Errorf("a longer sequence: %v", err)
	}
}

// TestNonPersistentCheckpoints: --non-persistent-save-interval 2 saves
// iterations 2 and 4 into --non-persistent-global-ckpt-dir and keeps only
// the newest; a run whose --load holds nothing newer resumes from it, at
// iteration 4, with the uninterrupted run's losses; the refusals name the
// flags.
func TestNonPersistentCheckpoints(t *testing.T) {
	whole := mustRun(t, mockArgs(6))
	np := filepath.Join(t.TempDir(), "np")
	a := mockArgs(6)
	a.LRDecayIters, a.ExitInterval = 6, 5
	a.NonPersistentSaveInterval, a.NonPersistentGlobalCkptDir = 2, np
	mustRun(t, a)
	iters, _ := filepath.Glob(filepath.Join(np, "iter_*"))
	if len(iters) != 1 || filepath.Base(iters[0]) != "iter_0000004" {
		t.Fatalf("the non-persistent directory holds %v, want iter_0000004 alone", iters)
	}
	resume := mockArgs(6)
	resume.LRDecayIters, resume.NonPersistentCkptType, resume.NonPersistentGlobalCkptDir = 6, "global", np
	resume.Save = t.TempDir()
	resume.Load = resume.Save
	res := mustRun(t, resume)
	if res.StartIteration != 4 {
		t.Fatalf("resumed at iteration %d, want 4 (the non-persistent checkpoint)", res.StartIteration)
	}
	for i, l := range res.Losses {
		if w := whole.Losses[4+i]; l != w {
			t.Errorf("step %d: loss %v, the uninterrupted run's %v", 5+i, l, w)
		}
	}
	for _, c := range []struct {
		edit func(a *Args)
		want string
	}{
		{func(a *Args) { a.NonPersistentSaveInterval = 2 }, "without --save or --non-persistent-global-ckpt-dir"},
		{func(a *Args) { a.NonPersistentCkptType = "local" }, "resiliency extension"},
		{func(a *Args) { a.NonPersistentSaveInterval = -1 }, "must not be negative"},
		{func(a *Args) {
			a.NonPersistentSaveInterval, a.Save, a.NonPersistentGlobalCkptDir = 1, np, np
		}, "is also --save: the non-persistent saves keep only their newest iteration"},
	} {
		b := mockArgs(2)
		c.edit(&b)
		if _, err := Run(context.Background(), b, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want an error naming %q", err, c.want)
		}
	}
	// A damaged tracker there is an error, not a silent start from the
	// older checkpoint or from scratch.
	if err := os.WriteFile(filepath.Join(np, ckpt.TrackerFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := resume
	fresh.Save = t.TempDir()
	fresh.Load = fresh.Save
	if _, err := Run(context.Background(), fresh, Options{}); err == nil || !strings.Contains(err.Error(), "non-persistent checkpoints") || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged non-persistent tracker: %v, want an error naming it", err)
	}
}
