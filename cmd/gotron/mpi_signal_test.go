//go:build mpi

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMPISignalStopsEveryRank sends SIGTERM to one process (rank 2) of an
// `mpirun -np 4` run (TP 2 × DP 2, dropout on) with --exit-signal-handler:
// every rank finishes the same iteration, the checkpoint is saved and
// mpirun exits 0; rank 2 does not acknowledge the signal itself (the first
// rank speaks for all, as mpirun signals every rank at once). Resumed under mpirun, the next 5 iterations equal, bit
// for bit, those of an mpirun run that never stopped.
func TestMPISignalStopsEveryRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, bin := buildMPI(ctx, t)
	ckpt := filepath.Join(dir, "ckpt")
	mpirun := func(iters int, extra ...string) *exec.Cmd {
		args := []string{"--allow-run-as-root", "--oversubscribe", "-np", "4", bin, "train", "--backend", "mpi",
			"--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
			"--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "8", "--tensor-model-parallel-size", "2",
			"--hidden-dropout", "0.1", "--lr", "3e-3", "--lr-decay-iters", "100000", "--eval-iters", "0", "--log-interval", "1",
			"--train-iters", strconv.Itoa(iters), "--exit-signal-handler"}
		return exec.CommandContext(ctx, "mpirun", append(args, extra...)...)
	}

	run := mpirun(100000, "--save", ckpt)
	out, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var log strings.Builder
	for sc.Scan() && !strings.Contains(sc.Text(), " iteration ") {
	}
	pid, err := rankPID(run.Process.Pid, 2)
	if err != nil {
		run.Process.Kill()
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("mpirun after SIGTERM to rank 2: %v, want exit 0\n%s\n%s", err, log.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(ckpt, "latest_checkpointed_iteration.txt"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !strings.Contains(log.String(), "exiting after iteration "+strconv.Itoa(k)+" (SIGTERM)") {
		t.Fatalf("checkpoint at %q, log:\n%s", b, log.String())
	}
	// Only the first rank acknowledges a signal: mpirun forwards one to
	// every rank, and one line says it for all (rank 2's is silent).
	if n := strings.Count(stderr.String(), "finishing the iteration"); n != 0 {
		t.Errorf("rank 2 acknowledged the signal itself (%d lines):\n%s", n, stderr.String())
	}

	resumed, whole := filepath.Join(dir, "resumed.jsonl"), filepath.Join(dir, "whole.jsonl")
	if out, err := mpirun(k+5, "--load", ckpt, "--log-json", resumed).CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if out, err := mpirun(k+5, "--log-json", whole).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted: %v\n%s", err, out)
	}
	t.Logf("SIGTERM to rank 2: every rank stopped after iteration %d and saved", k)
	got, want := lossesByIteration(t, resumed), lossesByIteration(t, whole)
	if len(got) != 5 {
		t.Fatalf("the resumed run logged %d iterations, want 5", len(got))
	}
	for it, l := range got {
		if l != want[it] {
			t.Errorf("iteration %d: resumed %.9g, uninterrupted %.9g", it, l, want[it])
		}
	}
}

// rankPID returns the process of world rank r among mpirun's children
// (all running once rank 0 has logged an iteration).
func rankPID(mpirun, r int) (int, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		st, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(mpirun) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "OMPI_COMM_WORLD_RANK="+strconv.Itoa(r) {
				return strconv.Atoi(filepath.Base(d))
			}
		}
	}
	return 0, fmt.Errorf("no child of mpirun (pid %d) has OMPI_COMM_WORLD_RANK=%d", mpirun, r)
}

// lossesByIteration reads a --log-json file's losses by iteration.
func lossesByIteration(t *testing.T, path string) map[int]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Iteration int      `json:"iteration"`
			Loss      *float64 `json:"loss"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Loss != nil {
			out[r.Iteration] = *r.Loss
		}
	}
	return out
}
