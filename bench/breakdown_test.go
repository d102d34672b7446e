package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/tensor"
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
// the share of every phase and, with one rank in the process, the table
// of the step's GEMMs; with two in-process ranks, whose GEMMs the timer
// cannot tell apart, no table.
func TestBenchBreakdown(t *testing.T) {
	var out strings.Builder
	if err := Run(context.Background(), &out, Options{Configs: []string{"small"}, Iters: 1, Breakdown: true}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	i := strings.Index(text, "phases of small (CPU time of the timed iterations")
	if i < 0 {
		t.Fatalf("no phases line after the table:\n%s", text)
	}
	phases, table, _ := strings.Cut(text[i:], "\n")
	for _, n := range phaseNames {
		if !strings.Contains(phases, n+" ") {
			t.Errorf("phase %q missing: %s", n, phases)
		}
	}
	if !strings.HasPrefix(table, "GEMMs of small (wall time per timed iteration") {
		t.Fatalf("no GEMM table after the phases:\n%s", text)
	}
	for _, name := range []string{"qkv forward", "qkv dX", "qkv dW", "proj forward", "fc2 dW"} {
		if !strings.Contains(table, name) {
			t.Errorf("GEMM %q missing from the table:\n%s", name, table)
		}
	}
	if strings.Contains(table, "not in --gemm's list") {
		t.Errorf("a GEMM of the model missing from gemmShapes:\n%s", table)
	}
	out.Reset()
	if err := Run(context.Background(), &out, Options{Configs: []string{"small"}, Iters: 1, Breakdown: true, TensorParallel: 2}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "GEMMs of small") {
		t.Errorf("a GEMM table for two in-process ranks:\n%s", out.String())
	}
}

// TestPrintGemmTimes: the table names each shape after gemmShapes, counts
// its calls and time, and puts the GEMMs' total beside the step's.
func TestPrintGemmTimes(t *testing.T) {
	c := configs["small"]
	qkv := gemmShapes(c, 2)[0] // qkv forward
	// two iterations: 8 calls of qkv forward in 20 ms, 3 of an expert's
	// shape (its calls vary with the routing) in 2 ms
	r := Result{StepMS: 22, GemmIters: 2, Gemms: []tensor.GemmTime{
		{GemmShape: tensor.GemmShape{M: qkv.m, N: qkv.n, K: qkv.k, TransA: qkv.transA, TransB: qkv.transB}, Threads: 2, Calls: 8, Time: 20 * time.Millisecond},
		{GemmShape: tensor.GemmShape{M: 3, N: 3, K: 3}, Threads: 1, Calls: 3, Time: 2 * time.Millisecond},
	}}
	var out strings.Builder
	printGemmTimes(&out, c, 2, r)
	text := out.String()
	for _, want := range []string{
		"GEMMs of small (wall time per timed iteration, the attention's blocks not among them): 11.0 ms of the 22.0 ms step (50.0%)",
		"qkv forward", fmt.Sprintf("%d×%d×%d", qkv.m, qkv.n, qkv.k), "(not in --gemm's list)", "3×3×3",
		"    4      10.0", // qkv forward: 4 calls, 10 ms per iteration
		"  1.5       1.0", // the expert's: 1.5 calls, 1 ms
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%q missing:\n%s", want, text)
		}
	}
	out.Reset()
	printGemmTimes(&out, c, 2, Result{StepMS: 22})
	if out.Len() != 0 {
		t.Errorf("a table without GEMM times:\n%s", out.String())
	}
}
