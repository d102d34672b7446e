package train

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/tensorboard"
)

// TestTensorBoard: --tensorboard-dir writes Megatron's scalars, read back
// from the event file: lm loss, grad-norm, params-norm, num-zeros,
// learning-rate, batch-size and
// their "vs samples" twins every --tensorboard-log-interval iterations,
// the loss each iteration's Result loss as a float32, loss-scale 1 without
// a scaler, world-size, iteration-time and (with --log-throughput)
// throughput from the second iteration on, the memory tags, and the
// validation loss and perplexity.
func TestTensorBoard(t *testing.T) {
	a := ppArgs(2, 1, 2)
	a.TrainIters, a.EvalInterval, a.EvalIters = 6, 3, 1
	a.TensorBoard.Dir = filepath.Join(t.TempDir(), "tb")
	a.TensorBoard.LogInterval = 2
	a.TensorBoard.LogTimers, a.TensorBoard.LogValidationPPL, a.TensorBoard.LogMemory, a.TensorBoard.LogWorldSize = true, true, true, true
	a.LogThroughput, a.LogParamsNorm, a.LogNumZerosInGrad = true, true, true
	res := mustRun(t, a)
	files, err := filepath.Glob(filepath.Join(a.TensorBoard.Dir, "events.out.tfevents.*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("event files %v (%v), want one", files, err)
	}
	events, err := tensorboard.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	got := tensorboard.ByTag(events)
	steps := func(tag string) int { return len(got[tag]) }
	for it := 2; it <= 6; it += 2 {
		if v, ok := got["lm loss"][int64(it)]; !ok || v != float32(res.Losses[it-1]) {
			t.Errorf("lm loss at %d: %v (%v), want %v", it, v, ok, float32(res.Losses[it-1]))
		}
		if v := got["grad-norm"][int64(it)]; v != float32(res.GradNorms[it-1]) {
			t.Errorf("grad-norm at %d: %v, want %v", it, v, float32(res.GradNorms[it-1]))
		}
		if v, z := got["params-norm"][int64(it)], got["num-zeros"][int64(it)]; v != float32(res.ParamsNorms[it-1]) || z != float32(res.NumZeros[it-1]) {
			t.Errorf("params-norm %v and num-zeros %v at %d, want %v and %v", v, z, it, res.ParamsNorms[it-1], res.NumZeros[it-1])
		}
		if v, ok := got["lm loss vs samples"][int64(it*a.GlobalBatchSize)]; !ok || v != float32(res.Losses[it-1]) {
			t.Errorf("lm loss vs samples at %d samples: %v (%v)", it*a.GlobalBatchSize, v, ok)
		}
	}
	for tag, n := range map[string]int{"lm loss": 3, "learning-rate": 3, "batch-size": 3, "loss-scale": 3, "world-size": 3,
		"grad-norm vs samples": 3, "params-norm vs samples": 3, "num-zeros vs samples": 3, "iteration-time": 3, "throughput": 3, "mem-allocated-bytes": 3, "mem-max-allocated-bytes": 3,
		"lm loss validation": 2, "lm loss validation ppl": 2, "lm loss validation vs samples": 2} {
		if steps(tag) != n {
			t.Errorf("%s at %d steps %v, want %d", tag, steps(tag), got[tag], n)
		}
	}
	if got["batch-size"][2] != 8 || got["loss-scale"][2] != 1 || got["world-size"][2] != 2 || got["mem-max-allocated-bytes"][2] <= 0 {
		t.Errorf("batch-size %v, loss-scale %v, world-size %v, peak memory %v", got["batch-size"][2], got["loss-scale"][2], got["world-size"][2], got["mem-max-allocated-bytes"][2])
	}
	if v, p := got["lm loss validation"][6], got["lm loss validation ppl"][6]; v != float32(res.ValidLoss) || math.Abs(float64(p)-math.Exp(res.ValidLoss)) > 1e-3*float64(p) {
		t.Errorf("validation loss %v and ppl %v at 6, want %v and exp of it", v, p, res.ValidLoss)
	}
}

// TestTensorBoardRefused: a TensorBoard flag without --tensorboard-dir,
// and a directory that cannot be made, are refused with the fix.
func TestTensorBoardRefused(t *testing.T) {
	a := ppArgs(1, 1, 1)
	a.TensorBoard.LogTimers = true
	if err := a.Validate(1); err == nil || !strings.Contains(err.Error(), "--tensorboard-dir") {
		t.Errorf("--log-timers-to-tensorboard alone: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a = ppArgs(1, 1, 1)
	a.TrainIters, a.TensorBoard.Dir = 4, file
	if _, err := Run(t.Context(), a, Options{}); err == nil || !strings.Contains(err.Error(), "give a directory") {
		t.Errorf("--tensorboard-dir naming a file: %v", err)
	}
}

// TestLogThroughput: --log-throughput adds the model TFLOP/s per rank to
// the iteration line, a positive number.
func TestLogThroughput(t *testing.T) {
	a := mockArgs(2)
	a.LogThroughput, a.LogInterval, a.LRWarmupIters = true, 1, 0
	var out strings.Builder
	if _, err := Run(t.Context(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(out.String(), "throughput per rank (TFLOP/s/rank): ")
	var v float64
	if _, err := fmt.Sscan(rest, &v); !ok || err != nil || !(v > 0) {
		t.Errorf("no positive TFLOP/s in the line:\n%s", out.String())
	}
}
