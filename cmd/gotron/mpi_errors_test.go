//go:build mpi

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/ckpt"
)

// buildMPI skips the test without mpirun, else builds gotron with MPI into
// a temporary directory, and returns the directory and the binary.
func buildMPI(ctx context.Context, t *testing.T) (dir, bin string) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found: install openmpi-bin (make test-mpi does)")
	}
	dir = t.TempDir()
	bin = filepath.Join(dir, "gotron")
	if out, err := exec.CommandContext(ctx, "go", "build", "-tags", "mpi", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags mpi: %v\n%s", err, out)
	}
	return dir, bin
}

// TestMPIStartErrorsOnce: a run that every rank of an `mpirun -np 2` job
// refuses at start-up says why once, not once per process: invalid
// arguments, a --save another run holds, and a checkpoint whose rank-1
// shard is damaged (then no "resumed" line either).
func TestMPIStartErrorsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, bin := buildMPI(ctx, t)
	mpirun := func(extra ...string) (stdout, stderr string, err error) {
		args := []string{"--allow-run-as-root", "--oversubscribe", "-np", "2", bin, "train", "--backend", "mpi",
			"--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
			"--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "4", "--tensor-model-parallel-size", "2",
			"--lr", "3e-3", "--lr-decay-iters", "10", "--eval-iters", "0", "--log-interval", "1", "--train-iters", "2"}
		cmd := exec.CommandContext(ctx, "mpirun", append(args, extra...)...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}
	once := func(what, stderr, want string) {
		t.Helper()
		if n := strings.Count(stderr, want); n != 1 {
			t.Errorf("%s: %q said %d times, want once; stderr:\n%s", what, want, n, stderr)
		}
	}

	_, stderr, err := mpirun("--lr", "nan")
	if err == nil {
		t.Fatal("mpirun with --lr nan succeeded")
	}
	once("--lr nan", stderr, "invalid arguments: --lr NaN: must be a finite number")

	save := filepath.Join(dir, "held")
	l, _, err := ckpt.LockDir(save)
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, err = mpirun("--save", save)
	l.Unlock()
	if err == nil {
		t.Fatal("mpirun on a held --save succeeded")
	}
	once("held --save", stderr, "is saving checkpoints there")

	good := filepath.Join(dir, "ckpt")
	if out, stderr, err := mpirun("--save", good); err != nil {
		t.Fatalf("saving: %v\n%s\n%s", err, out, stderr)
	}
	shard := filepath.Join(ckpt.IterDir(good, 2), ckpt.ShardFile(1))
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := mpirun("--load", good, "--train-iters", "3")
	if err == nil {
		t.Fatal("mpirun loading a damaged shard succeeded")
	}
	once("damaged shard", stderr, "is damaged")
	if strings.Contains(stdout, "resumed from") {
		t.Errorf("a run that failed to load printed %q", stdout)
	}
}
