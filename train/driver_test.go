package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// TestDriverFollowsRun: a program driving the ranks itself (Prepare,
// NewRank, Step) runs the iterations Run runs: the same losses and
// gradient norms bit for bit, on two pipeline stages whose last
// iteration records its timeline; each step starts with the run's
// collection, and none starts once its context is done.
func TestDriverFollowsRun(t *testing.T) {
	a := ppArgs(2, 1, 2)
	a.TrainIters, a.EvalIters, a.Sample = 3, 0, 0
	want, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(a, Options{}, Placement{World: 2, Machine: 2, Process: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var got []StepReport
	err = local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		r, err := p.NewRank(ctx, g)
		if err != nil {
			return err
		}
		for r.Iteration() < a.TrainIters {
			s, err := r.Step(ctx, StepOptions{Timeline: r.Iteration() == a.TrainIters-1})
			if err != nil {
				return err
			}
			if g.Rank() == 0 {
				got = append(got, s)
			}
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.Step(done, StepOptions{}); !errors.Is(err, context.Canceled) || r.Iteration() != a.TrainIters {
			return fmt.Errorf("a step with its context done: %v, at iteration %d; want context.Canceled, nothing run", err, r.Iteration())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.Losses) {
		t.Fatalf("%d steps, Run took %d", len(got), len(want.Losses))
	}
	if n := p.gc.next.Load(); n != int64(a.TrainIters) {
		t.Errorf("the run's collector last collected for iteration %d, want each step's (the last: %d)", n-1, a.TrainIters-1)
	}
	for i, s := range got {
		if s.Iteration != i+1 || s.Loss != want.Losses[i] || math.Float64bits(s.GradNorm) != math.Float64bits(want.GradNorms[i]) {
			t.Errorf("step %d: iteration %d, loss %v, norm %v; Run: loss %v, norm %v", i, s.Iteration, s.Loss, s.GradNorm, want.Losses[i], want.GradNorms[i])
		}
		if (s.Timeline != nil) != (i == len(got)-1) {
			t.Errorf("step %d: timeline %v, want one on the last step only", i, s.Timeline != nil)
		}
	}
}

// TestPlacementChecked: a placement whose counts cannot be is refused by
// Prepare, before anything is opened.
func TestPlacementChecked(t *testing.T) {
	for _, pl := range []Placement{{World: 2}, {World: 1, Machine: 2, Process: 1}, {World: 2, Machine: 1, Process: 2}} {
		if _, err := Prepare(mockArgs(1), Options{}, pl); err == nil || !strings.Contains(err.Error(), "1 ≤ process ≤ machine ≤ world") {
			t.Errorf("%+v: %v, want the placement refused", pl, err)
		}
	}
}
