package train

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestInprocessRestart: rank 1 of DP 2 fails once at iteration 6; under
// --inprocess-restart the run resumes from --save's checkpoint of
// iteration 4 and ends with the uninterrupted run's losses bit for bit,
// dropout included. Without it, or once the restarts are spent, the
// fault is the run's error.
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
	fault := errors.New("injected fault")
	var fired atomic.Int32
	injectFault = func(rank, it int) error {
		if rank == 1 && it == 6 && fired.Add(1) == 1 {
			return fault
		}
		return nil
	}
	t.Cleanup(func() { injectFault = nil })

	if _, err := Run(context.Background(), args(), Options{}); !errors.Is(err, fault) {
		t.Fatalf("without --inprocess-restart: %v, want the fault", err)
	}
	fired.Store(0)
	a := args()
	a.InprocessRestart = true
	var out strings.Builder
	res, err := Run(context.Background(), a, Options{Out: &out})
	if err != nil || res.Restarts != 1 || res.StartIteration != 4 {
		t.Fatalf("with --inprocess-restart: %+v, %v", res, err)
	}
	if fmt.Sprint(res.Losses) != fmt.Sprint(full.Losses[4:]) {
		t.Errorf("restarted losses %v, uninterrupted %v", res.Losses, full.Losses[4:])
	}
	if want := "in-process restart 1 of 3 from --save " + a.Save + " (iteration 4), after: rank 1: injected fault"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	injectFault = func(rank, it int) error { return fault } // every time
	a = args()
	a.InprocessRestart, a.InprocessMaxIterations = true, 2
	if res, err := Run(context.Background(), a, Options{}); !errors.Is(err, fault) || res != nil {
		t.Fatalf("a fault every time: %+v, %v, want the fault after 2 restarts", res, err)
	}
}
