package train

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestTrainSamplesSchedule: --train-samples 24 with a global batch of 8 is
// 3 iterations, the schedule counts samples (warmup 8 samples: full
// learning rate after one step), and --lr-warmup-fraction is a fraction of
// the decay; the flags of the other unit are refused.
func TestTrainSamplesSchedule(t *testing.T) {
	a := mockArgs(0)
	a.TrainSamples, a.LRWarmupIters, a.LRWarmupSamples, a.LRDecayStyle = 24, 0, 8, "linear"
	a = normalise(a, 1)
	if err := a.Validate(1); err != nil {
		t.Fatal(err)
	}
	if a.TrainIters != 3 {
		t.Fatalf("%d iterations, want 3", a.TrainIters)
	}
	s := a.Schedule() // in samples: after step steps, LR(8·step)
	for step, want := range []float64{0, a.LR, a.LR - (a.LR-a.MinLR)*8/16} {
		if got := s.LR(step * a.GlobalBatchSize); math.Abs(got-want) > 1e-12 {
			t.Errorf("LR after %d steps = %g, want %g", step, got, want)
		}
	}
	res, err := Run(context.Background(), a, Options{})
	if err != nil || len(res.Losses) != 3 {
		t.Fatalf("%v, %v", res, err)
	}
	f := mockArgs(10)
	f.LRWarmupIters, f.LRWarmupFraction = 0, 0.3
	if w := f.Schedule().WarmupIters; w != 3 {
		t.Errorf("--lr-warmup-fraction 0.3 of 10 iterations: warmup %d, want 3", w)
	}
	for _, c := range []struct {
		set  func(*Args)
		want string
	}{
		{func(a *Args) { a.TrainSamples = 24; a.TrainIters = 0; a.LRDecayIters = 5 }, "use --lr-warmup-samples/--lr-decay-samples"},
		{func(a *Args) { a.LRDecaySamples = 5 }, "need --train-samples"},
		{func(a *Args) { a.LRWarmupFraction = 0.5 }, "--lr-warmup-fraction 0.5 and --lr-warmup-iters 2 both set the warmup: give one"},
		{func(a *Args) { a.TrainSamples = 4; a.TrainIters = 0; a.LRWarmupIters = 0 }, "less than the first global batch (8): raise --train-samples to at least 8"},
		{func(a *Args) { a.SkipTrain = true }, "--skip-train evaluates a loaded model"},
	} {
		b := mockArgs(3)
		c.set(&b)
		if _, err := Run(context.Background(), b, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestSkipTrainEvaluates: --skip-train with --load trains nothing and
// reports the loaded model's validation loss.
func TestSkipTrainEvaluates(t *testing.T) {
	dir := t.TempDir()
	a := mockArgs(3)
	a.Save, a.EvalIters = dir, 2
	trained, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := mockArgs(3)
	b.Load, b.SkipTrain, b.EvalIters = dir, true, 2
	res, err := Run(context.Background(), b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Losses) != 0 || res.ValidLoss != trained.ValidLoss {
		t.Fatalf("%d iterations, validation %g; want none and %g", len(res.Losses), res.ValidLoss, trained.ValidLoss)
	}
}
