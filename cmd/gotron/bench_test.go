package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/bench"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// TestBenchFlagErrors checks that bad bench flags stop the command before
// anything runs, with one error naming the flag.
func TestBenchFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--data-parallel-size", "0"}, []string{"--data-parallel-size 0", "at least 1"}},
		{[]string{"--data-parallel-size", "-2"}, []string{"--data-parallel-size -2", "at least 1"}},
		{[]string{"--backend", "nccl"}, []string{`--backend "nccl"`, "local", "mpi"}},
		{[]string{"--configs", "tiny"}, []string{`"tiny"`, "small, medium"}},
		{[]string{"--align-param-gather", "--no-align-param-gather"}, []string{"contradict"}},
		{[]string{"--configs", "small", "--data-parallel-size", "2", "--ddp-bucket-size", "-5"}, []string{"bucket_size = -5"}},
		{[]string{"--configs", "small", "--data-parallel-size", "2", "--overlap-grad-reduce", "--overlap-param-gather"}, []string{"overlap_param_gather", "use_distributed_optimizer"}},
		{[]string{"--configs", "small", "--bf16", "--fp16"}, []string{"fp16 and bf16 are both true"}},
		{[]string{"--configs", "small", "--loss-scale", "128"}, []string{"--loss-scale 128", "neither --bf16 nor --fp16"}},
		{[]string{"--gemm", "--tensor-model-parallel-size", "2", "--fp16"}, []string{"--gemm", "drop --tensor-model-parallel-size, --fp16"}},
		{[]string{"--gemm", "--backend", "mpi", "--cpuprofile", "x.prof"}, []string{"drop --backend, --cpuprofile"}},
		{[]string{"--gemm", "--configs", "tiny"}, []string{`"tiny"`, "small, medium"}},
	}
	for _, c := range cases {
		out, err := run(t, append([]string{"bench"}, c.args...)...)
		if err == nil {
			t.Errorf("bench %v: no error\n%s", c.args, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("bench %v: %q, want it to mention %q", c.args, err, w)
			}
		}
		if out != "" {
			t.Errorf("bench %v printed before failing:\n%s", c.args, out)
		}
	}
	if !mpiBuilt {
		_, err := run(t, "bench", "--backend", "mpi")
		if err == nil || !strings.Contains(err.Error(), "make build-mpi") {
			t.Errorf("--backend mpi without Open MPI: %v, want the build command", err)
		}
	}
}

// TestBenchRankDataParallelSize checks that, in a job of processes, a
// --data-parallel-size that is not the job's processes / (TP·PP) is
// refused on every rank before anything runs.
func TestBenchRankDataParallelSize(t *testing.T) {
	w := local.NewWorld(2, comm.Options{Timeout: time.Minute})
	err := w.Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		return bench.RunRank(ctx, g, io.Discard, bench.Options{Configs: []string{"small"}, DataParallel: 4}, 2)
	})
	if err == nil || !strings.Contains(err.Error(), "--data-parallel-size 4") || !strings.Contains(err.Error(), "mpirun -np 4") {
		t.Fatalf("got %v, want an error naming --data-parallel-size 4 and mpirun -np 4", err)
	}
}

// TestBenchDataParallel runs one iteration of the small model at DP 2 with
// the distributed optimizer and both overlaps and checks the line: 8
// buckets of 300000 elements, an Adam update and a parameter all-gather
// (no time is compared with anything).
func TestBenchDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the small model for two iterations")
	}
	out, err := run(t, "bench", "--configs", "small", "--iters", "1", "--data-parallel-size", "2", "--use-distributed-optimizer",
		"--overlap-grad-reduce", "--overlap-param-gather", "--ddp-bucket-size", "300000")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "data parallel 2") || !strings.Contains(lines[0], "distributed optimizer with overlapped parameter all-gather") {
		t.Fatalf("want a header, the column names and one line:\n%s", out)
	}
	// The last five columns: buckets, adam ms, gather ms, first ms, cp wait.
	v := strings.Fields(lines[2])
	if !strings.HasSuffix(lines[1], "buckets   adam ms gather ms  first ms  cp wait") || len(v) != 19 {
		t.Fatalf("want 19 columns ending in buckets, adam ms, gather ms, first ms and cp wait:\n%s", out)
	}
	if v[18] != "0.0%" {
		t.Errorf("cp wait %s without context parallelism:\n%s", v[18], out)
	}
	if v[17] == "0.0" {
		t.Errorf("the first iteration was not timed:\n%s", out)
	}
	if v[14] != "8" {
		t.Errorf("buckets %s, want 8 (the small model's 3.2M elements in buckets of 300000):\n%s", v[14], out)
	}
	if v[15] == "0.0" || v[16] == "0.0" {
		t.Errorf("the Adam update or the parameter all-gather was not timed:\n%s", out)
	}
}

// TestBenchContextParallel runs the small model on CP 2 (the ring) and
// checks the header names the layout and the line has its cp wait column.
func TestBenchContextParallel(t *testing.T) {
	out, err := run(t, "bench", "--configs", "small", "--iters", "1", "--context-parallel-size", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "context parallel 2 (p2p); 2 in-process ranks") {
		t.Fatalf("want a header naming context parallel 2 (p2p), the column names and one line:\n%s", out)
	}
	if v := strings.Fields(lines[2]); len(v) != 19 || !strings.HasSuffix(v[18], "%") {
		t.Fatalf("want 19 columns ending in the cp wait percentage:\n%s", out)
	}
}
