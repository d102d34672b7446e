package train

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRerunReportStats: under report_stats every iteration runs twice and
// the two agree bit for bit (dropout on: its masks are keyed, not drawn),
// so the losses are those of a run without reruns and the report counts
// no difference.
func TestRerunReportStats(t *testing.T) {
	a := mockArgs(4)
	a.WorldSize, a.Model.HiddenDropout, a.LogInterval = 2, 0.1, 2
	want, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.RerunMode = RerunReportStats
	var out strings.Builder
	got, err := Run(context.Background(), a, Options{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Losses) != fmt.Sprint(want.Losses) {
		t.Errorf("losses %v, without reruns %v", got.Losses, want.Losses)
	}
	if n := strings.Count(out.String(), "rerun statistics: 0 of 2 iterations ran again differently"); n != 2 {
		t.Errorf("%d reports of no difference, want 2:\n%s", n, out.String())
	}
}

// TestRerunValidateResults: a loss made NaN on rank 1 once (a transient
// fault) is found not reproduced by the rerun and named as such; made NaN
// in both runs (a divergence, or a persistent fault) it is reproduced and
// named as a divergence.
func TestRerunValidateResults(t *testing.T) {
	var calls atomic.Int32
	for _, c := range []struct {
		name  string
		times int32
		want  string
	}{
		{"transient", 1, "did not reproduce its first run (the local loss of micro-batch 0 on rank 1: NaN, then"},
		{"reproduced", 2, "the local loss of micro-batch 0 on rank 1 is NaN, and a rerun of the iteration reproduced it bit for bit: the model diverged"},
	} {
		calls.Store(0)
		corruptLoss = func(rank, iteration, micro int, sum float32) float32 {
			if rank == 1 && iteration == 3 && micro == 0 && calls.Add(1) <= c.times {
				return float32(math.NaN())
			}
			return sum
		}
		a := mockArgs(4)
		a.WorldSize, a.RerunMode = 2, RerunValidateResults
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "iteration 3: ") {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	corruptLoss = nil
}

// TestRerunTransientFaultRestarts: validate_results' transient fault ends
// the run, and --inprocess-restart resumes it from the checkpoint: the run
// ends with the uninterrupted losses.
func TestRerunTransientFaultRestarts(t *testing.T) {
	args := func() Args {
		a := mockArgs(6)
		a.WorldSize, a.RerunMode = 2, RerunValidateResults
		a.Save, a.SaveInterval = t.TempDir(), 2
		return a
	}
	full, err := Run(context.Background(), args(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	corruptLoss = func(rank, iteration, micro int, sum float32) float32 {
		if rank == 0 && iteration == 4 && micro == 1 && calls.Add(1) == 1 {
			return float32(math.Inf(1))
		}
		return sum
	}
	t.Cleanup(func() { corruptLoss = nil })
	a := args()
	a.InprocessRestart = true
	res, err := Run(context.Background(), a, Options{})
	if err != nil || res.Restarts != 1 || fmt.Sprint(res.Losses) != fmt.Sprint(full.Losses[res.StartIteration:]) {
		t.Fatalf("restarted: %+v, %v; uninterrupted losses %v", res, err, full.Losses)
	}
}
