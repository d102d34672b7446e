package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/data"
)

// rampArgs is mockArgs with --train-samples and a ramp from start by inc
// to the global batch of 8 over samples samples.
func rampArgs(trainSamples, start, inc, samples int) Args {
	a := mockArgs(0)
	a.TrainSamples, a.LRWarmupIters, a.LRWarmupSamples = trainSamples, 0, 8
	a.RampupBatchSize = data.Ramp{Start: start, Increment: inc, Samples: samples}
	return a
}

// TestRampLayoutsMatchSingleRank trains a ramp from 2 to 8 over 24
// samples (global batches 2, 2, 2, 2, 4, 4, 6, 6, 8, …) on one rank, on DP 2
// with the distributed optimizer, on TP 2 and on PP 2: the losses equal
// the one rank's to 1e-6 relative, and the learning rate counts the
// ramp's samples.
func TestRampLayoutsMatchSingleRank(t *testing.T) {
	base := rampArgs(80, 2, 2, 24)
	base.LogJSON = filepath.Join(t.TempDir(), "log.jsonl")
	want, err := Run(context.Background(), base, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, base.LogJSON)
	var batches []int
	for _, r := range recs {
		batches = append(batches, r.GlobalBatchSize)
	}
	if got := fmt.Sprint(batches); got != "[2 2 2 2 4 4 6 6 8 8 8 8 8 8]" || recs[len(recs)-1].ConsumedSamples != 76 {
		t.Fatalf("global batches %s, consumed %d", got, recs[len(recs)-1].ConsumedSamples)
	}
	// Warmup of 8 samples: after the first step's 2 samples, a quarter of --lr.
	if lr := recs[1].LR; math.Abs(lr-base.LR/4) > 1e-15 {
		t.Errorf("second iteration's learning rate %g, want %g", lr, base.LR/4)
	}
	checkBatchLayouts(t, want, func() Args { return rampArgs(80, 2, 2, 24) })
}

// checkBatchLayouts trains the run args makes on DP 2 with the distributed
// optimizer, on TP 2 and on PP 2: each one's losses must equal want's to
// 1e-6 relative.
func checkBatchLayouts(t *testing.T, want *Result, args func() Args) {
	t.Helper()
	for _, l := range []struct {
		name string
		set  func(*Args)
	}{
		{"dp2-distopt", func(a *Args) { a.WorldSize, a.DDP.UseDistributedOptimizer = 2, true }},
		{"tp2", func(a *Args) { a.WorldSize, a.Model.TensorModelParallelSize = 2, 2 }},
		{"pp2", func(a *Args) { a.WorldSize, a.Model.PipelineModelParallelSize = 2, 2 }},
	} {
		a := args()
		l.set(&a)
		got, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		if len(got.Losses) != len(want.Losses) {
			t.Fatalf("%s: %d iterations, want %d", l.name, len(got.Losses), len(want.Losses))
		}
		for i := range want.Losses {
			if e := relErr(got.Losses[i], want.Losses[i]); e > 1e-6 {
				t.Errorf("%s: iteration %d: loss %.9g, one rank %.9g (relative %.2g)", l.name, i+1, got.Losses[i], want.Losses[i], e)
			}
		}
	}
}

// TestRampResumesMidRamp saves in the middle of the ramp (iteration 5,
// global batch 4) and resumes: the losses of the resumed run are the
// uninterrupted run's, bit for bit, so the data position, the batch size
// and the learning rate continue from the consumed samples.
func TestRampResumesMidRamp(t *testing.T) {
	a := rampArgs(80, 2, 2, 24)
	a.WorldSize = 2
	checkResumes(t, a, 5)
}

// checkResumes trains a whole, then up to iteration at with a checkpoint,
// then from it: the resumed run's losses must be the uninterrupted run's
// bit for bit. It returns the resumed run's arguments.
func checkResumes(t *testing.T, a Args, at int) Args {
	t.Helper()
	full, err := Run(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first := a
	first.Save, first.ExitInterval = dir, at
	if _, err := Run(context.Background(), first, Options{}); err != nil {
		t.Fatal(err)
	}
	rest := a
	rest.Load = dir
	res, err := Run(context.Background(), rest, Options{})
	if err != nil || res.StartIteration != at {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if fmt.Sprint(res.Losses) != fmt.Sprint(full.Losses[at:]) {
		t.Errorf("resumed losses %v, uninterrupted %v", res.Losses, full.Losses[at:])
	}
	return rest
}

// TestRampRefused: every malformed ramp is one clear error naming the flag.
func TestRampRefused(t *testing.T) {
	for _, c := range []struct {
		set  func(*Args)
		want string
	}{
		{func(a *Args) { a.RampupBatchSize.Increment = 0 }, "must be positive"},
		{func(a *Args) { a.RampupBatchSize.Start = 16 }, "the start is above --global-batch-size 8"},
		{func(a *Args) { a.RampupBatchSize.Increment = 4 }, "not a multiple of the increment 4"},
		{func(a *Args) { a.WorldSize = 2; a.RampupBatchSize = data.Ramp{Start: 1, Increment: 1, Samples: 24} }, "multiple of --micro-batch-size × data-parallel size = 2"},
		{func(a *Args) { a.TrainSamples, a.TrainIters, a.LRWarmupSamples = 0, 5, 0 }, "train with --train-samples instead of --train-iters"},
		{func(a *Args) {
			a.GlobalBatchSize, a.RampupBatchSize = 1<<22, data.Ramp{Start: 1, Increment: 1, Samples: 24}
		}, "more than 1048576: use a larger increment"},
	} {
		a := rampArgs(80, 2, 2, 24)
		c.set(&a)
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.Contains(err.Error(), "--rampup-batch-size") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// FuzzRamp: for any ramp the validation accepts, the global batch stays
// within [start, global], a multiple of micro × dp, never decreasing as
// samples are consumed, and --train-samples' iterations equal a
// one-at-a-time count (for counts small enough to make).
func FuzzRamp(f *testing.F) {
	f.Add(2, 2, 24, 8, 1, 1, int64(80), int64(7))
	f.Add(16, 16, 1000, 256, 2, 4, int64(100000), int64(999))
	f.Add(1, 1, 1<<40, 1<<20, 1, 1, int64(1)<<50, int64(1)<<39)
	f.Add(0, 1, -5, 8, 1, 1, int64(3), int64(-1))
	f.Add(8, 24, math.MaxInt64-2, 32, 1, 1, int64(1000), int64(5)) // a boundary near MaxInt64
	f.Fuzz(func(t *testing.T, start, inc, samples, global, micro, dp int, trainSamples, consumed int64) {
		a := mockArgs(0)
		a.RampupBatchSize = data.Ramp{Start: start, Increment: inc, Samples: samples}
		a.GlobalBatchSize, a.MicroBatchSize, a.TrainSamples = global, micro, int(trainSamples)
		if micro <= 0 || dp <= 0 || micro > 1<<20 || dp > 1<<10 || global <= 0 || global%(micro*dp) != 0 || trainSamples <= 0 {
			return
		}
		var errs []string
		a.validateRamp(dp, func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) })
		if len(errs) > 0 {
			return
		}
		if consumed < 0 {
			consumed = -(consumed + 1)
		}
		b, next := a.GlobalBatchAt(consumed), a.GlobalBatchAt(consumed+1)
		if b < start || b > global || b%(micro*dp) != 0 || next < b {
			t.Fatalf("ramp %+v to %d: batch %d after %d samples, %d after one more", a.RampupBatchSize, global, b, consumed, next)
		}
		if trainSamples/int64(start) <= 1<<16 {
			if got, want := a.iterationsFor(trainSamples), simulatedIterations(a, trainSamples); got != want {
				t.Fatalf("ramp %+v to %d, %d samples: %d iterations, counted %d", a.RampupBatchSize, global, trainSamples, got, want)
			}
		}
	})
}

// readRecords reads a --log-json file.
func readRecords(t *testing.T, path string) []Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestRampChangeRefusedOnResume: a checkpoint saved without a ramp does
// not resume with one (the iterations left and the data position would
// disagree); the error names the flag.
func TestRampChangeRefusedOnResume(t *testing.T) {
	a := mockArgs(0)
	a.TrainSamples, a.LRWarmupIters, a.Save = 24, 0, t.TempDir()
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatal(err)
	}
	b := rampArgs(80, 2, 2, 24)
	b.Load = a.Save
	if _, err := Run(context.Background(), b, Options{}); err == nil || !strings.Contains(err.Error(), "--rampup-batch-size's start 0 in the checkpoint, 2 in this run") {
		t.Fatalf("got %v, want the ramp's difference", err)
	}
}

// simulatedIterations counts --train-samples' iterations one at a time.
func simulatedIterations(a Args, samples int64) int {
	var c int64
	it := 0
	for c+int64(a.GlobalBatchAt(c)) <= samples {
		c += int64(a.GlobalBatchAt(c))
		it++
	}
	return it
}

// TestInterleavedAdviceInRunTerms: the interleaved schedule's advice
// names counts of microbatches, not gotron bench's --num-microbatches,
// which a run does not have.
func TestInterleavedAdviceInRunTerms(t *testing.T) {
	a := mockArgs(1)
	a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 2, 2
	a.Model.NumLayers, a.MicroBatchSize, a.GlobalBatchSize = 4, 8, 8
	err := a.Validate(2)
	if err == nil || !strings.Contains(err.Error(), "choose 2 or more microbatches") || strings.Contains(err.Error(), "--num-microbatches") {
		t.Errorf("1 microbatch on 2 stages × 2 virtual: %v; want the advice in microbatches", err)
	}
}
