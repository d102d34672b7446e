//go:build mpi

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gotron/gotron/train"
)

// TestMPITrainMatchesSingleRank runs `mpirun -np 2 gotron train --backend
// mpi --mock-data` for 20 iterations and compares its loss curve with a
// single in-process rank's: equal to 1e-6 relative.
func TestMPITrainMatchesSingleRank(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found: install openmpi-bin (make test-mpi does)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gotron")
	build := exec.Command("go", "build", "-tags", "mpi", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags mpi: %v\n%s", err, out)
	}
	flags := []string{"--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "8",
		"--train-iters", "20", "--lr", "3e-3", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine",
		"--hidden-dropout", "0", "--attention-dropout", "0", "--eval-iters", "0", "--log-interval", "10"}
	logPath := filepath.Join(dir, "mpi.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append(append([]string{"--allow-run-as-root", "--oversubscribe", "-np", "2", bin, "train", "--backend", "mpi"}, flags...), "--log-json", logPath)
	if out, err := exec.CommandContext(ctx, "mpirun", args...).CombinedOutput(); err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	got := readLosses(t, logPath)

	a := train.DefaultArgs()
	a.MockData = true
	a.Model.VocabSize, a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads, a.Model.SeqLength = 64, 2, 32, 4, 16
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 1, 8, 20
	a.LR, a.LRWarmupIters, a.LRDecayStyle = 3e-3, 2, "cosine"
	a.Model.HiddenDropout, a.Model.AttentionDropout, a.EvalIters = 0, 0, 0
	ref, err := train.Run(context.Background(), a, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ref.Losses) {
		t.Fatalf("mpirun logged %d iterations, want %d", len(got), len(ref.Losses))
	}
	for i := range got {
		if e := math.Abs(got[i]-ref.Losses[i]) / math.Abs(ref.Losses[i]); e > 1e-6 {
			t.Errorf("iteration %d: 2 MPI ranks %.9f, one rank %.9f (relative %.2g > 1e-6)", i+1, got[i], ref.Losses[i], e)
		}
	}
}

func readLosses(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	s := bufio.NewScanner(f)
	for s.Scan() {
		var r struct {
			Iteration int      `json:"iteration"`
			Loss      *float64 `json:"loss"`
		}
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Loss != nil {
			if r.Iteration != len(out)+1 {
				t.Fatalf("%s: iteration %s out of order", path, strconv.Itoa(r.Iteration))
			}
			out = append(out, *r.Loss)
		}
	}
	return out
}
