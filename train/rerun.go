package train

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gotron/gotron/comm"
)

// The --rerun-mode values, Megatron's (megatron/core/rerun_state_machine.py).
const (
	RerunDisabled        = "disabled"
	RerunValidateResults = "validate_results"
	RerunReportStats     = "report_stats"
)

// RerunModes are --rerun-mode's values.
var RerunModes = []string{RerunDisabled, RerunValidateResults, RerunReportStats}

// lossKey names a local loss sum of an iteration: its micro-batch, and 0
// for the main loss or k for MTP depth k.
type lossKey struct{ micro, depth int }

// rerunState is a rank's record of the local loss sums of an iteration's
// first run and of its rerun (--rerun-mode), and report_stats' record
// since the last report.
type rerunState struct {
	first, again map[lossKey]float32
	// active is set while a training iteration runs (start to finish):
	// evaluations are not rerun, as the reference disables its machine
	// in evaluate.
	active    bool
	rerunning bool
	// rejected lists the first run's non-finite losses (validate_results).
	rejected []lossKey
	// spiky is the rank's record of its local losses (validate_results
	// with --check-for-spiky-loss).
	spiky spikyCheck
	// note is validate_results' report of a transient fault the iteration
	// went on from, for the logging rank to print ("" without one).
	note string
	// runs and differing count the reruns and those whose losses differed
	// from the first run's, maxRel the largest relative difference, since
	// the last report (report_stats).
	runs, differing int
	maxRel          float64
}

// record keeps a local loss sum of the run in progress; it reports whether
// the loss check should let a non-finite value pass (validate_results: the
// rerun decides).
//
// Under validate_results a non-finite loss is rejected, and with spiky
// (--check-for-spiky-loss, the main loss) one at least SpikyLossFactor
// times the largest of the rank's first spikyLossSamples local losses
// (the reference's is_unexpectedly_large in its loss_func).
func (r *rerunState) record(k lossKey, sum float32, mode string, checkNaN, spiky bool) (deferCheck bool) {
	if !r.active {
		return false // an evaluation, or before the first step: no rerun
	}
	if r.rerunning {
		r.again[k] = sum
		return true
	}
	r.first[k] = sum
	if mode != RerunValidateResults {
		return false
	}
	v := float64(sum)
	if checkNaN && (math.IsNaN(v) || math.IsInf(v, 0)) || spiky && r.spiky.spike(v) {
		r.rejected = append(r.rejected, k)
		return true
	}
	return false
}

// start readies the record for an iteration's first run.
func (r *rerunState) start() {
	r.first, r.again, r.rejected, r.rerunning, r.note, r.active = map[lossKey]float32{}, map[lossKey]float32{}, nil, false, "", true
}

// finish ends the iteration's record.
func (r *rerunState) finish() { r.active = false }

// needsRerun reports whether the iteration must run again: under
// report_stats always; under validate_results when a rank's loss was
// rejected (an all-reduce over world).
func (t *trainer) needsRerun(ctx context.Context) (bool, error) {
	switch t.a.RerunMode {
	case RerunReportStats:
		return true, nil
	case RerunValidateResults:
		n := []int64{int64(len(t.rerun.rejected))}
		if err := t.groups.World.AllReduce(ctx, comm.I64(n), comm.Sum); err != nil {
			return false, fmt.Errorf("--rerun-mode: %w", err)
		}
		return n[0] > 0, nil
	}
	return false, nil
}

// verdict compares the rerun's local loss sums with the first run's, over
// every rank, and returns validate_results' diagnosis as an error, the
// same on every rank (nil under report_stats, which records the
// difference instead).
func (t *trainer) verdict(ctx context.Context) error {
	r := t.rerun
	var diff []lossKey
	rel := 0.0
	for k, v := range r.first {
		if w := r.again[k]; math.Float32bits(v) != math.Float32bits(w) {
			diff = append(diff, k)
			if d := math.Abs(float64(w-v)) / math.Abs(float64(v)); !math.IsNaN(d) {
				rel = max(rel, d)
			}
		}
	}
	if t.a.RerunMode == RerunReportStats {
		m := []float32{float32(rel), float32(len(diff))}
		if err := t.groups.World.AllReduce(ctx, comm.F32(m), comm.Max); err != nil {
			return fmt.Errorf("--rerun-mode: %w", err)
		}
		r.runs++
		if m[1] > 0 {
			r.differing++
		}
		r.maxRel = max(r.maxRel, float64(m[0]))
		return nil
	}
	// The lowest rank whose rerun differed, else the lowest whose loss was
	// rejected, tells every rank what it found.
	slices.SortFunc(diff, compareKeys)
	slices.SortFunc(r.rejected, compareKeys)
	found, differs := r.rejected, int64(0)
	if len(diff) > 0 {
		found, differs = diff, 1
	}
	// A differing rank's key is its rank, a rejecting one's world + its
	// rank: the least is the first differing rank, else the first
	// rejecting one.
	world := int64(t.groups.World.Size())
	mine := int64(t.groups.World.Rank()) + (1-differs)*world
	whom := []int64{math.MaxInt64}
	if len(found) > 0 {
		whom[0] = mine
	}
	if err := t.groups.World.AllReduce(ctx, comm.I64(whom), comm.Min); err != nil {
		return fmt.Errorf("--rerun-mode: %w", err)
	}
	detail := make([]int64, 4) // micro, depth, the first run's bits, the rerun's
	if len(found) > 0 && whom[0] == mine {
		k := found[0]
		detail = []int64{int64(k.micro), int64(k.depth), int64(math.Float32bits(r.first[k])), int64(math.Float32bits(r.again[k]))}
	}
	if err := t.groups.World.AllReduce(ctx, comm.I64(detail), comm.Sum); err != nil {
		return fmt.Errorf("--rerun-mode: %w", err)
	}
	rank, first, again := whom[0]%world, math.Float32frombits(uint32(detail[2])), math.Float32frombits(uint32(detail[3]))
	what := fmt.Sprintf("%s of micro-batch %d on rank %d", lossName(int(detail[1])), detail[0], rank)
	if whom[0] < world {
		// The rerun's result stands: the iteration goes on from it.
		r.note = fmt.Sprintf("gotron: warning: iteration %d: the rerun did not reproduce the first run (%s: %g, then %g): a transient fault or silent data corruption on rank %d; training goes on from the rerun (--rerun-mode validate_results)\n",
			t.iteration+1, what, first, again, rank)
		return nil
	}
	if v := float64(first); !math.IsNaN(v) && !math.IsInf(v, 0) {
		// A spike the rerun reproduced is the data's or the model's, not
		// a fault: the reference's check is not fatal.
		r.note = fmt.Sprintf("gotron: warning: iteration %d: %s is %g, at least %d times the largest of the first %d, and a rerun reproduced it bit for bit: a real spike, not a fault; training goes on (--rerun-mode validate_results, --check-for-spiky-loss)\n",
			t.iteration+1, what, first, SpikyLossFactor, spikyLossSamples)
		return nil
	}
	return noRestart{fmt.Errorf("--rerun-mode validate_results: %s is %g, and a rerun of the iteration reproduced it bit for bit: the model diverged (not a fault of the machine): lower --lr, raise --lr-warmup-iters or set --clip-grad, and check the data",
		what, first)}
}

// compareKeys orders loss keys by micro-batch, then depth.
func compareKeys(a, b lossKey) int {
	if a.micro != b.micro {
		return a.micro - b.micro
	}
	return a.depth - b.depth
}

// lossName is "the local loss", or MTP depth depth's.
func lossName(depth int) string {
	if depth > 0 {
		return fmt.Sprintf("MTP depth %d's local loss", depth)
	}
	return "the local loss"
}

// statsReport is report_stats' line for the interval (on the logging rank),
// and resets the record.
func (r *rerunState) statsReport() string {
	s := fmt.Sprintf("rerun statistics: %d of %d iterations ran again differently", r.differing, r.runs)
	if r.differing > 0 {
		s += fmt.Sprintf(" (largest relative difference of a rank's local loss %.3g)", r.maxRel)
	}
	r.runs, r.differing, r.maxRel = 0, 0, 0
	return s + " (--rerun-mode report_stats)\n"
}

// noRestart marks an error --inprocess-restart does not restart: the run
// would fail again the same way (a divergence a rerun reproduced).
type noRestart struct{ error }

func (e noRestart) Unwrap() error { return e.error }
