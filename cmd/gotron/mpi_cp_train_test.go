//go:build mpi

package main

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/train"
)

// TestMPITrainContextParallel runs `mpirun gotron train --backend mpi
// --mock-data` for 20 iterations at context-parallel size 2 with the p2p
// ring over 2 processes (K/V blocks sent between them), and at 4 with
// a2a+p2p over 2·2 processes (an all-to-all inside each pair, a ring
// across them), and compares each loss curve with a single in-process
// rank's: equal to 1e-6 relative, as the in-process layouts of train's
// TestContextParallelMatchesSingleRank.
func TestMPITrainContextParallel(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found: install openmpi-bin (make test-mpi does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gotron")
	if out, err := exec.CommandContext(ctx, "go", "build", "-tags", "mpi", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags mpi: %v\n%s", err, out)
	}
	flags := []string{"--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "8",
		"--train-iters", "20", "--lr", "3e-3", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine",
		"--hidden-dropout", "0", "--attention-dropout", "0", "--eval-iters", "0", "--log-interval", "10"}
	layouts := []struct {
		name, np string
		extra    []string
	}{
		{"cp2-p2p", "2", []string{"--context-parallel-size", "2", "--cp-comm-type", "p2p"}},
		{"cp4-a2a+p2p-2x2", "4", []string{"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p",
			"--hierarchical-context-parallel-sizes", "2", "2"}},
	}
	curves := make([][]float64, len(layouts))
	for i, l := range layouts {
		start := time.Now()
		logPath := filepath.Join(dir, l.name+".jsonl")
		args := append(append(append([]string{"--allow-run-as-root", "--oversubscribe", "-np", l.np, bin, "train", "--backend", "mpi"}, flags...),
			l.extra...), "--log-json", logPath)
		out, err := exec.CommandContext(ctx, "mpirun", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: mpirun: %v\n%s", l.name, err, out)
		}
		// Every process is a context-parallel rank of one replica.
		if want := "world " + l.np + " (data parallel 1,"; !strings.Contains(string(out), want) {
			t.Errorf("%s: rank 0 does not say %q:\n%s", l.name, want, out)
		}
		curves[i] = readLosses(t, logPath)
		t.Logf("%s: mpirun took %v", l.name, time.Since(start).Round(time.Millisecond))
	}

	a := train.DefaultArgs()
	a.MockData = true
	a.Model.VocabSize, a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads, a.Model.SeqLength = 64, 2, 32, 4, 16
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 1, 8, 20
	a.LR, a.LRWarmupIters, a.LRDecayStyle = 3e-3, 2, "cosine"
	a.Model.HiddenDropout, a.Model.AttentionDropout, a.EvalIters = 0, 0, 0
	ref, err := train.Run(ctx, a, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, l := range layouts {
		got := curves[k]
		if len(got) != len(ref.Losses) || len(got) != 20 {
			t.Fatalf("%s: mpirun logged %d iterations, one rank %d, want 20", l.name, len(got), len(ref.Losses))
		}
		worst := 0.0
		for i := range got {
			e := math.Abs(got[i]-ref.Losses[i]) / math.Abs(ref.Losses[i])
			worst = math.Max(worst, e)
			if e > 1e-6 {
				t.Errorf("%s: iteration %d: %s MPI ranks %.9f, one rank %.9f (relative %.2g > 1e-6)", l.name, i+1, l.np, got[i], ref.Losses[i], e)
			}
		}
		t.Logf("%s: largest relative loss difference from one rank %.2g", l.name, worst)
	}
}
