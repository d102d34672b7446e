package train

import (
	"context"
	"strings"
	"testing"
)

// TestPhaseOf: a stack's phase is its attention or optimizer scope, else
// the phase of the frame nearest the leaf; a rank goroutine's root is not
// communication.
func TestPhaseOf(t *testing.T) {
	root := []string{"github.com/gotron/gotron/comm/local.runRank", "github.com/gotron/gotron/comm/local.(*World).Run.func1"}
	for _, c := range []struct {
		frames []string
		want   string
	}{
		{[]string{"runtime.cgocall", "github.com/gotron/gotron/tensor/blas.sgemm", "github.com/gotron/gotron/tensor.Gemm"}, "GEMM"},
		{[]string{"github.com/gotron/gotron/tensor/blas.sgemm", "github.com/gotron/gotron/nn.(*attentionFn).Backward.func1"}, "attention"},
		{[]string{"github.com/gotron/gotron/tensor/kernels.adamSIMD", "github.com/gotron/gotron/optim.(*Adam).Step"}, "optimizer"},
		{[]string{"github.com/gotron/gotron/comm.addFloat32", "github.com/gotron/gotron/comm/local.(*group).AllReduce"}, "communication"},
		{[]string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "github.com/gotron/gotron/tensor.New"}, "allocation"},
		{[]string{"github.com/gotron/gotron/tensor/kernels.layerNormRowSIMD", "github.com/gotron/gotron/nn.layerNormFn.Forward"}, "other kernels"},
		{[]string{"runtime.gcDrain", "runtime.gcBgMarkWorker"}, "runtime and other"},
		{append([]string{"github.com/gotron/gotron/tensor/kernels.geluForward16"}, root...), "other kernels"},
		{append([]string{"github.com/gotron/gotron/train.(*trainer).step"}, root...), "runtime and other"},
		{[]string{"[libgomp.so.1.0.0]", "runtime._ExternalCode"}, "GEMM"},
		{[]string{"[unknown]", "runtime._ExternalCode"}, "GEMM"},
		{[]string{"[libopen-pal.so.40.30.2]", "runtime._ExternalCode"}, "communication"},
		{[]string{"[libc.so.6]", "runtime._ExternalCode"}, "runtime and other"},
	} {
		if got := phaseOf(c.frames); got != c.want {
			t.Errorf("%v: %s, want %s", c.frames, got, c.want)
		}
	}
}

// TestBenchBreakdown: --breakdown prints, after each configuration's line,
// the share of every phase.
func TestBenchBreakdown(t *testing.T) {
	var out strings.Builder
	if err := Bench(context.Background(), &out, BenchOptions{Configs: []string{"small"}, Iters: 1, Breakdown: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "phases of small (CPU time of the timed iterations") {
		t.Fatalf("no phases line after the table:\n%s", out.String())
	}
	for _, n := range phaseNames {
		if !strings.Contains(last, n+" ") {
			t.Errorf("phase %q missing: %s", n, last)
		}
	}
}
