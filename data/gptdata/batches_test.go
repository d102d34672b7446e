package gptdata

import (
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/data"
)

// compositions returns every way to cut n rows into consecutive pieces.
func compositions(n int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var out [][]int
	for first := 1; first <= n; first++ {
		for _, rest := range compositions(n - first) {
			out = append(out, append([]int{first}, rest...))
		}
	}
	return out
}

func concat(a, b data.Batch) data.Batch {
	a.Rows += b.Rows
	a.InputIDs = append(a.InputIDs, b.InputIDs...)
	a.Labels = append(a.Labels, b.Labels...)
	a.LossMask = append(a.LossMask, b.LossMask...)
	if b.PositionIDs != nil {
		a.PositionIDs = append(a.PositionIDs, b.PositionIDs...)
	}
	if b.Segments != nil {
		a.Segments = append(a.Segments, b.Segments...)
	}
	return a
}

func equalBatch(a, b data.Batch) bool {
	return a.Rows == b.Rows && a.Seq == b.Seq && slices.Equal(a.InputIDs, b.InputIDs) && slices.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.LossMask, b.LossMask) && slices.Equal(a.PositionIDs, b.PositionIDs) && slices.Equal(a.Segments, b.Segments)
}

// TestBatchRows: a global batch's rows are samples Consumed+row with the
// reference's tokens and masks, and any cut of the rows among ranks gives
// the same rows.
func TestBatchRows(t *testing.T) {
	corpus, open, cases := fixtures(t)
	c := &cases[1] // masks: every flag on, a pad id
	if c.Name != "masks" {
		t.Fatalf("case 1 is %s", c.Name)
	}
	ds := c.build(t, corpus, open, t.TempDir())
	b := NewBatches(ds[0])
	seq := corpus.SeqLength
	step := data.Step{Index: 2, Rows: 8, Consumed: 13}
	full := b.Batch(step, 0, step.Rows)
	if full.Rows != 8 || full.Seq != seq || full.PositionIDs == nil || full.Segments == nil {
		t.Fatalf("batch of %d rows of %d, position ids %v, segments %v", full.Rows, full.Seq, full.PositionIDs != nil, full.Segments != nil)
	}
	want := c.Splits[0]
	for r := range step.Rows {
		i := int(step.Consumed) + r
		o := r * seq
		if !slices.Equal(full.InputIDs[o:o+seq], want.Tokens[i][:seq]) || !slices.Equal(full.Labels[o:o+seq], want.Tokens[i][1:]) ||
			!slices.Equal(full.LossMask[o:o+seq], want.LossMask[i]) || !slices.Equal(full.PositionIDs[o:o+seq], want.PositionIDs[i]) ||
			!slices.Equal(full.Segments[o:o+seq], want.Segments[i]) {
			t.Fatalf("row %d is not the reference's sample %d", r, i)
		}
	}
	for _, cut := range compositions(step.Rows) {
		got, row := data.Batch{Seq: seq}, 0
		for _, n := range cut {
			got = concat(got, b.Batch(step, row, n))
			row += n
		}
		if !equalBatch(got, full) {
			t.Fatalf("rows cut as %v differ from the whole batch", cut)
		}
	}
	plain := NewBatches(c.buildPlain(t, corpus, open)).Batch(step, 0, 2)
	if plain.PositionIDs != nil || plain.Segments != nil {
		t.Error("position ids or segments without the flags")
	}
}

// buildPlain builds the case's train split without the mask flags.
func (c *caseFile) buildPlain(t *testing.T, corpus corpusFile, open func(string) (Source, error)) Dataset {
	cfg := c.config(corpus.SeqLength, corpus.EOD, t.TempDir())
	cfg.ResetPositionIDs, cfg.ResetAttentionMask, cfg.EODMaskLoss, cfg.PadID = false, false, false, nil
	blend, _ := ParseBlend(c.DataPath)
	ds, err := Build(cfg, blend, c.NumSamples, open)
	if err != nil {
		t.Fatal(err)
	}
	return ds[0]
}

func TestBatchPanics(t *testing.T) {
	corpus, open, cases := fixtures(t)
	c := &cases[6] // blend_prefixes
	ds := c.build(t, corpus, open, t.TempDir())
	b := NewBatches(ds[1])
	n := int64(ds[1].Len())
	for name, f := range map[string]func(){
		"rows past the step":    func() { b.Batch(data.Step{Rows: 4}, 2, 3) },
		"negative consumed":     func() { b.Batch(data.Step{Rows: 4, Consumed: -1}, 0, 1) },
		"past the dataset":      func() { b.Batch(data.Step{Rows: 4, Consumed: n - 2}, 0, 4) },
		"sample past the blend": func() { ds[1].Sample(int(n)) },
		"negative sample":       func() { ds[0].Sample(-1) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "gptdata: ") {
					t.Errorf("%s: panic %v", name, r)
				}
			}()
			f()
		}()
	}
	if got := b.Batch(data.Step{Rows: 4, Consumed: n - 2}, 0, 2); got.Rows != 2 {
		t.Errorf("the last two samples: %d rows", got.Rows)
	}
}
