package train

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
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
