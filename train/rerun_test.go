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

// TestRerunValidateResults: a loss made Inf on rank 0 once (a transient
// fault) is not reproduced by the rerun: the run says so, naming the rank
// and the micro-batch, and goes on from the rerun to the uninterrupted
// run's losses bit for bit. Made NaN in both runs (a divergence, or a
// persistent fault) it is reproduced, and the run stops naming it.
func TestRerunValidateResults(t *testing.T) {
	args := func() Args {
		a := mockArgs(6)
		a.WorldSize, a.RerunMode, a.LogInterval = 2, RerunValidateResults, 1
		return a
	}
	full, err := Run(context.Background(), args(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	inject := func(times int32, v float32) {
		calls.Store(0)
		corruptLoss = func(rank, iteration, micro int, sum float32) float32 {
			if rank == 0 && iteration == 3 && micro == 1 && calls.Add(1) <= times {
				return v
			}
			return sum
		}
	}
	t.Cleanup(func() { corruptLoss = nil })

	inject(1, float32(math.Inf(1)))
	var out strings.Builder
	res, err := Run(context.Background(), args(), Options{Out: &out})
	if err != nil || fmt.Sprint(res.Losses) != fmt.Sprint(full.Losses) {
		t.Fatalf("transient: %v; losses %v, uninterrupted %v", err, res, full.Losses)
	}
	if want := "iteration 3: the rerun did not reproduce the first run (the local loss of micro-batch 1 on rank 0: +Inf, then"; !strings.Contains(out.String(), want) {
		t.Errorf("transient: the output lacks %q:\n%s", want, out.String())
	}

	inject(2, float32(math.NaN()))
	_, err = Run(context.Background(), args(), Options{})
	if want := "iteration 3: --rerun-mode validate_results: the local loss of micro-batch 1 on rank 0 is NaN, and a rerun of the iteration reproduced it bit for bit: the model diverged"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("reproduced: %v, want %q", err, want)
	}
}

// TestRerunKeepsExpertBiasAndEvaluation: report_stats with MoE expert
// bias gives the losses of a run without reruns (the rerun routes with the
// bias the first run routed with), and an evaluation-only run
// (--skip-train) under a rerun mode evaluates as without one.
func TestRerunKeepsExpertBiasAndEvaluation(t *testing.T) {
	a := moeArgs(1)
	a.TrainIters = 4
	a.Model.MoERouterScoreFunction, a.Model.MoERouterEnableExpertBias = "sigmoid", true
	a.Save = t.TempDir()
	want, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := a
	b.Save, b.RerunMode = "", RerunReportStats
	got, err := Run(context.Background(), b, Options{})
	if err != nil || fmt.Sprint(got.Losses) != fmt.Sprint(want.Losses) {
		t.Fatalf("report_stats with expert bias: %v; losses %v, without reruns %v", err, got, want.Losses)
	}
	for _, mode := range []string{RerunValidateResults, RerunReportStats} {
		e := a
		e.Save, e.Load, e.SkipTrain, e.EvalIters, e.RerunMode = "", a.Save, true, 1, mode
		res, err := Run(context.Background(), e, Options{})
		if err != nil || math.IsNaN(res.ValidLoss) {
			t.Errorf("--skip-train under %s: %+v, %v", mode, res, err)
		}
	}
}
