package data

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxStepBatches bounds the entries of a step batch-size schedule (real
// schedules have a handful).
const MaxStepBatches = 1024

// StepBatch is one entry of a step schedule: from the iteration that begins
// after From consumed samples on, the global batch is Batch (until the next
// entry's From).
type StepBatch struct {
	From  int64
	Batch int
}

// StepSchedule is --step-batch-size-schedule, Megatron's
// StepBatchsizeNumMicroBatchesCalculator (megatron/core/
// num_microbatches_calculator.py): the global batch of an iteration is
// the Batch of the last entry whose From is at most the samples consumed
// before it. Its entries are sorted, the first From is 0 and the Froms
// strictly increase (ParseStepSchedule); the batches may go up or down.
// The nil StepSchedule is none.
type StepSchedule []StepBatch

// ParseStepSchedule reads "THRESHOLD:BATCH THRESHOLD:BATCH …" (entries
// separated by spaces or commas, in any order) as Megatron's training
// reads it: each number may end in K, M, B or T (10³, 10⁶, 10⁹, 10¹²,
// either case) and be a decimal ("2.4B"), taken as the float64 product
// truncated to an integer; the thresholds count tokens, converted to
// samples by dividing by seqLength (rounded down, as the reference; with
// seqLength 0 they count samples). The schedule must then start at 0,
// its thresholds strictly increase, and every batch be positive.
func ParseStepSchedule(s string, seqLength int) (StepSchedule, error) {
	fields := strings.Fields(strings.ReplaceAll(s, ",", " "))
	if len(fields) == 0 {
		return nil, fmt.Errorf("no entries: give THRESHOLD:BATCH pairs, for example \"0:16 2.4B:320 4.8B:624\"")
	}
	if len(fields) > MaxStepBatches {
		return nil, fmt.Errorf("%d entries, more than %d", len(fields), MaxStepBatches)
	}
	if seqLength < 0 {
		return nil, fmt.Errorf("the sequence length %d is negative", seqLength)
	}
	var out StepSchedule
	for _, f := range fields {
		e, err := parseStepEntry(f, seqLength)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b StepBatch) int {
		switch {
		case a.From < b.From:
			return -1
		case a.From > b.From:
			return 1
		}
		return 0
	})
	if out[0].From != 0 {
		return nil, fmt.Errorf("the first threshold is %s, not 0: the schedule must give the batch the run starts with (add \"0:BATCH\")", out.describe(0, seqLength))
	}
	for i := 1; i < len(out); i++ {
		if out[i].From == out[i-1].From {
			return nil, fmt.Errorf("two thresholds at %s: each must be above the one before", out.describe(i, seqLength))
		}
	}
	return out, nil
}

// parseStepEntry reads one "THRESHOLD:BATCH".
func parseStepEntry(f string, seqLength int) (StepBatch, error) {
	th, bs, ok := strings.Cut(f, ":")
	if !ok {
		return StepBatch{}, fmt.Errorf("entry %q is not THRESHOLD:BATCH", f)
	}
	from, err := parseScaled(th)
	if err != nil {
		return StepBatch{}, fmt.Errorf("entry %q: threshold: %w", f, err)
	}
	batch, err := parseScaled(bs)
	switch {
	case err != nil:
		return StepBatch{}, fmt.Errorf("entry %q: batch: %w", f, err)
	case batch <= 0:
		return StepBatch{}, fmt.Errorf("entry %q: the batch must be positive", f)
	case batch > math.MaxInt32:
		return StepBatch{}, fmt.Errorf("entry %q: a batch of %d samples is beyond any run", f, batch)
	}
	if seqLength > 0 {
		from /= int64(seqLength)
	}
	return StepBatch{From: from, Batch: int(batch)}, nil
}

// parseScaled reads a non-negative number with an optional K, M, B or T
// suffix, as the float64 product truncated toward zero (Python's
// int(float(v)·multiplier)).
func parseScaled(v string) (int64, error) {
	mult := 1.0
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'K', 'k':
			mult = 1e3
		case 'M', 'm':
			mult = 1e6
		case 'B', 'b':
			mult = 1e9
		case 'T', 't':
			mult = 1e12
		}
		if mult != 1 {
			v = v[:n-1]
		}
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%q is not a number (K, M, B and T multiply by 10³, 10⁶, 10⁹, 10¹²)", v)
	}
	x *= mult
	switch {
	case x < 0:
		return 0, fmt.Errorf("%q is negative", v)
	case x >= 1<<62:
		return 0, fmt.Errorf("%q is too large", v)
	}
	return int64(x), nil
}

// describe names entry i's threshold: in samples, and the tokens it was
// given as when seqLength is set.
func (s StepSchedule) describe(i, seqLength int) string {
	if seqLength > 0 {
		return fmt.Sprintf("%d samples (of %d tokens)", s[i].From, seqLength)
	}
	return fmt.Sprintf("%d samples", s[i].From)
}

// String writes s in its samples form, "0:16 1171875:320", which
// ParseStepSchedule with seqLength 0 reads back.
func (s StepSchedule) String() string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = fmt.Sprintf("%d:%d", e.From, e.Batch)
	}
	return strings.Join(parts, " ")
}

// entry returns the index of the entry in force after consumed samples.
func (s StepSchedule) entry(consumed int64) int {
	i, _ := slices.BinarySearchFunc(s, consumed+1, func(e StepBatch, c int64) int {
		if e.From < c {
			return -1
		}
		return 1
	})
	return max(i-1, 0)
}

// GlobalBatch returns the global batch of the iteration that begins after
// consumed samples.
func (s StepSchedule) GlobalBatch(consumed int64) int { return s[s.entry(consumed)].Batch }

// Last returns the batch the schedule ends with.
func (s StepSchedule) Last() int { return s[len(s)-1].Batch }

// Run walks iters iterations beginning after consumed samples, one step
// per entry reached, calling visit with each entry's batch and the
// iterations run at it; it returns the samples consumed after them.
func (s StepSchedule) Run(consumed int64, iters int, visit func(batch, iters int)) int64 {
	for iters > 0 {
		i := s.entry(consumed)
		b := int64(s[i].Batch)
		n := int64(iters)
		if i+1 < len(s) {
			n = min(n, (s[i+1].From-consumed+b-1)/b) // ⌈(next − c)/b⌉: the batches until the next entry
		}
		if visit != nil {
			visit(int(b), int(n))
		}
		consumed += n * b
		iters -= int(n)
	}
	return consumed
}

// Iterations returns the iterations that samples train: as many whole
// global batches as fit in samples, each of the schedule's batch after
// the samples before it (a partial last batch is dropped, as gotron's
// --rampup-batch-size and the reference's constant batch drop it).
func (s StepSchedule) Iterations(samples int64) int {
	var c int64
	iters := 0
	for c < samples {
		i := s.entry(c)
		b := int64(s[i].Batch)
		fit := (samples - c) / b
		if fit == 0 {
			break
		}
		if i+1 < len(s) {
			fit = min(fit, (s[i+1].From-c+b-1)/b)
		}
		iters += int(fit)
		c += fit * b
	}
	return iters
}
