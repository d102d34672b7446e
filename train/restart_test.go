package train

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestInprocessRestart: --inject-fault kill@1:6 fails rank 1 of DP 2 once;
// under --inprocess-restart the run resumes from --save's checkpoint of
// iteration 4 and ends with the uninterrupted run's losses bit for bit,
// dropout included, its --log-json holding every iteration; without it the
// fault is the run's error, with where to resume; a fault every time spends
// the restarts.
func TestInprocessRestart(t *testing.T) {
	args := func() Args {
		a := mockArgs(8)
		a.WorldSize, a.Model.HiddenDropout = 2, 0.1
		a.Save, a.SaveInterval = t.TempDir(), 2
		return a
	}
	full, err := Run(context.Background(), args(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := args()
	a.InjectFault = "kill@1:6"
	_, err = Run(context.Background(), a, Options{})
	if want := "the newest checkpoint is iteration 4 in " + a.Save + ": resume with --load " + a.Save; err == nil ||
		!strings.Contains(err.Error(), "--inject-fault kill@1:6: the rank fails here") || !strings.Contains(err.Error(), want) {
		t.Fatalf("without --inprocess-restart: %v, want the fault and %q", err, want)
	}
	a = args()
	a.InjectFault, a.InprocessRestart = "kill@1:6", true
	a.LogJSON = filepath.Join(t.TempDir(), "log.jsonl")
	var out strings.Builder
	res, err := Run(context.Background(), a, Options{Out: &out})
	if err != nil || res.Restarts != 1 || res.StartIteration != 4 {
		t.Fatalf("with --inprocess-restart: %+v, %v", res, err)
	}
	if fmt.Sprint(res.Losses) != fmt.Sprint(full.Losses[4:]) {
		t.Errorf("restarted losses %v, uninterrupted %v", res.Losses, full.Losses[4:])
	}
	if want := "in-process restart 1 of 3 from " + a.Save + " (iteration 4), after: rank 1: --inject-fault kill@1:6: the rank fails here"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	// Iterations 1–5, then 5–8 again from the checkpoint of 4.
	if recs := readRecords(t, a.LogJSON); len(recs) != 9 || recs[4].Iteration != 5 || recs[5].Iteration != 5 {
		t.Errorf("--log-json holds %d records, want 9 (5 before the fault, 4 after)", len(recs))
	}

	fault := errors.New("injected fault")
	injectFault = func(rank, it int) error { return fault } // every time
	t.Cleanup(func() { injectFault = nil })
	a = args()
	a.InprocessRestart, a.InprocessMaxIterations = true, 2
	if res, err := Run(context.Background(), a, Options{}); !errors.Is(err, fault) || res != nil {
		t.Fatalf("a fault every time: %+v, %v, want the fault after 2 restarts", res, err)
	}
}

// TestInprocessRestartOwnCheckpointsOnly: a restart resumes from a
// checkpoint this job saved — its non-persistent one too — and not from
// one --save held before the job started.
func TestInprocessRestartOwnCheckpointsOnly(t *testing.T) {
	dir := t.TempDir()
	old := mockArgs(6)
	old.Save = dir
	if _, err := Run(context.Background(), old, Options{}); err != nil {
		t.Fatal(err)
	}
	// A fine-tuning job from it, saving into the same directory only
	// non-persistently, fails at iteration 4 once.
	a := mockArgs(6)
	a.Load, a.Save, a.Finetune, a.SaveInterval = dir, dir, true, 0
	a.NonPersistentSaveInterval, a.InprocessRestart, a.InjectFault = 2, true, "kill@0:4"
	var out strings.Builder
	res, err := Run(context.Background(), a, Options{Out: &out})
	if err != nil || res.Restarts != 1 || res.StartIteration != 2 {
		t.Fatalf("%+v, %v:\n%s", res, err, out.String())
	}
	if want := "from " + a.NonPersistentDir(dir) + " (iteration 2)"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	// Failing before its first save, it starts again from its own start.
	a.InjectFault = "kill@0:1"
	out.Reset()
	if res, err = Run(context.Background(), a, Options{Out: &out}); err != nil || res.StartIteration != 0 || !strings.Contains(out.String(), "from the job's start") {
		t.Fatalf("%+v, %v:\n%s", res, err, out.String())
	}
}

// TestInprocessRestartNotAfterSignal: a failure in a run a signal has asked
// to stop is not restarted.
func TestInprocessRestartNotAfterSignal(t *testing.T) {
	a := mockArgs(4)
	a.WorldSize, a.Save, a.InprocessRestart, a.InjectFault = 2, t.TempDir(), true, "kill@1:1"
	stop := &Stop{}
	stop.Request(syscall.SIGTERM)
	var out strings.Builder
	if _, err := Run(context.Background(), a, Options{Out: &out, Stop: stop}); err == nil || strings.Contains(out.String(), "in-process restart") {
		t.Fatalf("%v:\n%s", err, out.String())
	}
}
