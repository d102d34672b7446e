package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt"
)

// TestDivergenceIsAnError trains with an absurd learning rate and no
// clipping: the run must stop with an error naming the iteration and the
// fix, not train on NaNs — from the micro-batch loss check (the default),
// naming the micro-batch; from the gradient buckets' NaN check, naming the
// parameter; or without either from the iteration's loss and norm check.
func TestDivergenceIsAnError(t *testing.T) {
	for _, c := range []struct {
		loss, grad bool
		want       string
	}{{true, true, "--check-for-nan-in-loss-and-grad"}, {false, true, "check_for_nan_in_grad"}, {false, false, "the gradient norm"}} {
		a := mockArgs(30)
		a.WorldSize = 2
		a.LR, a.LRWarmupIters, a.ClipGrad, a.LRDecayStyle = 1e6, 0, 0, "constant"
		a.CheckForNaNInLossAndGrad, a.DDP.CheckForNaNInGrad = c.loss, c.grad
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.Contains(err.Error(), "training diverged") || !strings.Contains(err.Error(), "--lr") || !strings.Contains(err.Error(), "iteration ") {
			t.Fatalf("loss check %v, gradient check %v: got %v, want a divergence error naming the iteration and --lr", c.loss, c.grad, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("loss check %v, gradient check %v: got %v, want %q", c.loss, c.grad, err, c.want)
		}
	}
}

// TestFailedSaveStopsEveryRank makes rank 1's shard fail at iteration 2
// (a full disk, say) under TP 2: both ranks stop with the cause, naming
// the rank, the message says that the checkpoint of iteration 1 is intact,
// and nothing temporary is left.
func TestFailedSaveStopsEveryRank(t *testing.T) {
	old := writeShard
	t.Cleanup(func() { writeShard = old })
	writeShard = func(dir string, rank int, pieces []ckpt.PieceData) (ckpt.Shard, error) {
		if rank == 1 && strings.Contains(dir, "iter_0000002") {
			return ckpt.Shard{}, errors.New("no space left on device")
		}
		return old(dir, rank, pieces)
	}
	a := mockArgs(3)
	a.WorldSize, a.Model.TensorModelParallelSize = 2, 2
	a.Save, a.SaveInterval = t.TempDir(), 1
	_, err := Run(context.Background(), a, Options{})
	if err == nil || !strings.Contains(err.Error(), "rank 1: no space left") || !strings.Contains(err.Error(), "the checkpoint of iteration 1 in "+a.Save+" is intact") {
		t.Fatalf("got %v, want the save error and the intact iteration", err)
	}
	entries, _ := os.ReadDir(a.Save)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}

// TestUnwritableSaveRefusedUpFront: a --save path that cannot hold a
// checkpoint (here under a regular file) is refused before training, not
// at the first save.
func TestUnwritableSaveRefusedUpFront(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		a := mockArgs(3)
		a.WorldSize = 2
		a.Save = dir
		res, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "invalid arguments: --save "+dir) || res != nil {
			t.Errorf("--save %s: got %v, want an up-front error naming it", dir, err)
		}
	}
}

func TestBadArgumentsAreReportedTogether(t *testing.T) {
	a := mockArgs(1)
	a.Model.HiddenSize = 30 // not divisible by 4 heads
	a.GlobalBatchSize = 3   // not divisible by micro-batch × dp = 2
	a.WorldSize = 2
	a.MockData, a.TextDataPath = true, []string{"x"}
	_, err := Run(context.Background(), a, Options{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--hidden-size", "--global-batch-size 3", "exactly one data source"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// TestVocabularyTooSmallForText: byte-level text needs 256 token ids; a
// smaller --vocab-size is one error before any rank starts.
func TestVocabularyTooSmallForText(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := mockArgs(3)
	a.MockData, a.TextDataPath, a.SplitValid = false, []string{dir}, 0
	a.Model.SeqLength = 4
	a.WorldSize = 2
	_, err := Run(context.Background(), a, Options{})
	if err == nil || !strings.Contains(err.Error(), "--vocab-size 64 is smaller than the data's vocabulary 256") || strings.Contains(err.Error(), "rank") {
		t.Fatalf("got %v, want one vocabulary error naming --vocab-size", err)
	}
}

// TestTensorParallelErrors: layouts that cannot work end in one error
// naming the flags and the fix, before any rank starts.
func TestTensorParallelErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*Args)
		want   []string
	}{
		{"heads not divisible by tp", func(a *Args) { a.WorldSize, a.Model.TensorModelParallelSize, a.Model.NumAttentionHeads = 4, 4, 2 },
			[]string{"num_attention_heads 2 is not divisible by tensor_model_parallel_size 4"}},
		{"world not divisible by tp", func(a *Args) { a.WorldSize, a.Model.TensorModelParallelSize = 3, 2 },
			[]string{"3", "tensor_model_parallel_size"}},
		{"sequence not divisible under sp", func(a *Args) {
			a.WorldSize, a.Model.TensorModelParallelSize, a.Model.SequenceParallel, a.Model.SeqLength = 4, 4, true, 18
		}, []string{"seq_length 18 is not divisible by tensor_model_parallel_size 4", "--sequence-parallel"}},
		{"a checkpoint format gotron does not write", func(a *Args) { a.CkptFormat = "torch" },
			[]string{"--ckpt-format torch", "pass torch_dist"}},
		{"sequence parallel without tp", func(a *Args) { a.Model.SequenceParallel = true },
			[]string{"sequence_parallel is true and tensor_model_parallel_size is 1", "--tensor-model-parallel-size above 1", "drop --sequence-parallel"}},
		{"prompt outside a small vocabulary", func(a *Args) { a.Sample = 10 },
			[]string{"--sample-prompt", "outside the vocabulary [0, 100)", "--vocab-size 256"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := tpArgs(1, 1)
			c.change(&a)
			_, err := Run(context.Background(), a, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if !strings.HasPrefix(err.Error(), "invalid arguments") {
				t.Errorf("the error comes from a rank, not from validation:\n%v", err)
			}
		})
	}
}

// TestNonFiniteFlagsRefused: a NaN or infinite value of a float flag is
// one "invalid arguments" error naming the flag, before any rank starts.
func TestNonFiniteFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		flag string
		set  func(a *Args)
	}{
		{"--lr", func(a *Args) { a.LR = math.NaN() }},
		{"--hidden-dropout", func(a *Args) { a.Model.HiddenDropout = float32(math.NaN()) }},
		{"--clip-grad", func(a *Args) { a.ClipGrad = math.Inf(1) }},
	} {
		a := tpArgs(1, 1)
		c.set(&a)
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), "finite") {
			t.Errorf("%s: error %v, want one naming the flag and asking for a finite number", c.flag, err)
		}
	}
}

// TestNegativeAndOutOfRangeIntegersRefused: the issue's --global-batch-size
// -4 trained "successfully" with negative micro-batches; every such value
// is now an "invalid arguments" error naming the flag.
func TestNegativeAndOutOfRangeIntegersRefused(t *testing.T) {
	for _, c := range []struct {
		flag string
		set  func(a *Args)
	}{
		{"--global-batch-size -4", func(a *Args) { a.GlobalBatchSize = -4 }},
		{"--lr-decay-iters -3", func(a *Args) { a.LRDecayIters = -3 }},
		{"--threads -1", func(a *Args) { a.Threads = -1 }},
		{"--distributed-timeout-minutes 1e+300", func(a *Args) { a.DistributedTimeoutMinutes = 1e300 }},
	} {
		a := mockArgs(3)
		c.set(&a)
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "invalid arguments: "+c.flag) {
			t.Errorf("%s: error %v, want one naming the flag", c.flag, err)
		}
	}
}

// TestDamagedShardIsOneLine: a flipped byte in a shard, found by the rank
// that reads it, is reported as that rank's error alone: the cause, the
// shard and the tensor, without the in-process world's wrapping ("rank N:"
// when several ranks run); and no "resumed" line comes before it.
func TestDamagedShardIsOneLine(t *testing.T) {
	for _, world := range []int{1, 2} {
		a := mockArgs(3)
		a.WorldSize, a.Model.TensorModelParallelSize = world, world
		a.Save = t.TempDir()
		if _, err := Run(context.Background(), a, Options{}); err != nil {
			t.Fatal(err)
		}
		shard := filepath.Join(ckpt.IterDir(a.Save, 3), ckpt.ShardFile(world-1))
		b, err := os.ReadFile(shard)
		if err != nil {
			t.Fatal(err)
		}
		b[100] ^= 1
		if err := os.WriteFile(shard, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := a
		r.Save, r.Load, r.TrainIters = "", a.Save, 4
		r.OverrideOptParamScheduler = true // the decay follows --train-iters
		var out strings.Builder
		_, err = Run(context.Background(), r, Options{Out: &out})
		if strings.Contains(out.String(), "resumed from") {
			t.Errorf("world %d: the run printed %q though rank %d could not load", world, out.String(), world-1)
		}
		want := "--load " + a.Save
		if world > 1 {
			want = fmt.Sprintf("rank %d: --load %s", world-1, a.Save)
		}
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "is damaged") || strings.Contains(err.Error(), "\n") {
			t.Errorf("world %d: got %v, want one line starting %q", world, err, want)
		}
	}
}

// TestSecondRunOnTheSaveDirectoryRefused: a run whose --save another run
// holds is refused before it trains, naming the holder (on one rank and
// on two); the lock goes with the run that held it, and a lock a dead run
// left on this machine is taken over with a note.
func TestSecondRunOnTheSaveDirectoryRefused(t *testing.T) {
	for _, world := range []int{1, 2} {
		a := mockArgs(3)
		a.WorldSize, a.Model.TensorModelParallelSize = world, world
		a.Save = t.TempDir()
		held, _, err := ckpt.LockDir(a.Save)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		_, err = Run(context.Background(), a, Options{Out: &out})
		var le *ckpt.LockedError
		if !errors.As(err, &le) || le.Holder.PID != os.Getpid() || strings.Contains(err.Error(), "\n") {
			t.Errorf("world %d: a run on a held --save: %v, want one line naming pid %d", world, err, os.Getpid())
		}
		if it, _ := ckpt.Latest(a.Save); out.Len() > 0 || it != 0 {
			t.Errorf("world %d: the refused run printed %q and left iteration %d", world, out.String(), it)
		}
		held.Unlock()
		if _, err := Run(context.Background(), a, Options{}); err != nil {
			t.Fatalf("world %d: the run once the lock is released: %v", world, err)
		}
		if _, err := os.Stat(filepath.Join(a.Save, ckpt.LockFile)); !os.IsNotExist(err) {
			t.Errorf("world %d: the run left its lock behind (%v)", world, err)
		}
	}

	a := mockArgs(3)
	a.Save = t.TempDir()
	host, _ := os.Hostname()
	dead := fmt.Sprintf(`{"pid":2147483647,"host":%q,"started":"2026-11-28T10:00:00Z"}`, host)
	if err := os.WriteFile(filepath.Join(a.Save, ckpt.LockFile), []byte(dead), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if _, err := Run(context.Background(), a, Options{Out: &out}); err != nil {
		t.Fatalf("a run over a dead run's lock: %v", err)
	}
	if !strings.Contains(out.String(), "was locked by a run that is gone (pid 2147483647 on "+host) {
		t.Errorf("no take-over note in %q", out.String())
	}
}

// TestNoInitialization: --no-initialization without --load, or with a
// --load that holds no checkpoint yet, is refused (the model would train
// from zeros); with a checkpoint the run is the same as with the weights
// drawn first.
func TestNoInitialization(t *testing.T) {
	a := mockArgs(3)
	a.Model.PerformInitialization = false
	if _, err := Run(context.Background(), a, Options{}); err == nil || !strings.Contains(err.Error(), "--no-initialization draws no initial weights, and --load is not given") {
		t.Errorf("without --load: %v", err)
	}
	a.Load = t.TempDir()
	a.Save = a.Load
	if _, err := Run(context.Background(), a, Options{}); err == nil || !strings.Contains(err.Error(), "holds no checkpoint yet, and --no-initialization drew no weights") {
		t.Errorf("with an empty --load: %v", err)
	}
	saved := mockArgs(3)
	saved.Save = t.TempDir()
	if _, err := Run(context.Background(), saved, Options{}); err != nil {
		t.Fatal(err)
	}
	var losses [2][]float64
	for i, init := range []bool{true, false} {
		r := mockArgs(5)
		r.Load, r.Model.PerformInitialization = saved.Save, init
		r.OverrideOptParamScheduler = true // the decay follows --train-iters
		res, err := Run(context.Background(), r, Options{})
		if err != nil {
			t.Fatal(err)
		}
		losses[i] = res.Losses
	}
	if fmt.Sprint(losses[0]) != fmt.Sprint(losses[1]) || len(losses[0]) != 2 {
		t.Errorf("resumed losses %v with initialisation, %v without", losses[0], losses[1])
	}
}

// TestSmallRefusalsAndFixes: --threads beyond the machine's cores is
// refused with the count; --log-json into a directory that does not exist
// yet makes it; a run whose checkpoint is already at --train-iters says
// there is nothing to train.
func TestSmallRefusalsAndFixes(t *testing.T) {
	a := ppArgs(1, 1, 1)
	a.Threads = runtime.NumCPU() + 1
	if err := a.Validate(1); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--threads %d: this machine gives the process %d core(s)", a.Threads, runtime.NumCPU())) {
		t.Errorf("--threads beyond the cores: %v", err)
	}
	dir := t.TempDir()
	a = ppArgs(1, 1, 1)
	a.TrainIters, a.LogJSON, a.Save, a.EvalIters = 4, filepath.Join(dir, "logs", "run", "log.jsonl"), filepath.Join(dir, "ckpt"), 0
	mustRun(t, a)
	if _, err := os.Stat(a.LogJSON); err != nil {
		t.Errorf("--log-json into a new directory: %v", err)
	}
	a.Load = a.Save
	var out strings.Builder
	if _, err := Run(t.Context(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to train: the checkpoint is at iteration 4 and --train-iters is 4") {
		t.Errorf("a finished run resumed says:\n%s", out.String())
	}
}

// TestMoEUnbuiltRefusedUpFront: what gotron's MoE layer does not do yet
// is refused by validation (so gotron plan refuses it too), with the
// builder's words.
func TestMoEUnbuiltRefusedUpFront(t *testing.T) {
	for _, c := range []struct {
		set  func(*Args)
		want string
	}{
		{func(a *Args) {
			a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "uniform", 1
		}, "full recompute of MoE layers is not built yet"},
		{func(a *Args) { a.Model.CalculatePerTokenLoss = true }, "--calculate-per-token-loss are not built yet"},
	} {
		a := mockArgs(1)
		a.Model.NumMoEExperts, a.Model.MoERouterTopK = 4, 2
		c.set(&a)
		if err := a.Validate(1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v; want %q", err, c.want)
		}
	}
}
