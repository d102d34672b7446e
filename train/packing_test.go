package train

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/source"
)

// packedData is mock data read as packed documents: every input token
// below eod ends a document, and the rows carry the position ids and
// segments Megatron's _get_ltor_masks_and_position_ids derives from the
// end-of-document tokens (--reset-position-ids: positions restart at 0
// after each; --reset-attention-mask: segment t counts the ends among
// inputs 0..t−1).
type packedData struct {
	data.MockDataset
	eod                 int32
	positions, segments bool
}

func (d packedData) Batch(step data.Step, row0, rows int) data.Batch {
	b := d.MockDataset.Batch(step, row0, rows)
	if d.positions {
		b.PositionIDs = make([]int32, len(b.InputIDs))
	}
	if d.segments {
		b.Segments = make([]int32, len(b.InputIDs))
	}
	for r := range b.Rows {
		var seg, pos int32
		for t := range b.Seq {
			k := r*b.Seq + t
			if d.positions {
				b.PositionIDs[k] = pos
			}
			if d.segments {
				b.Segments[k] = seg
			}
			pos++
			if b.InputIDs[k] < d.eod {
				seg, pos = seg+1, 0
			}
		}
	}
	return b
}

// packingArgs is tpArgs at sequence length 32, trained 6 steps, with
// learned absolute positions or RoPE.
func packingArgs(world int, rope bool) Args {
	a := tpArgs(world, 1)
	a.Model.SeqLength, a.TrainIters, a.EvalIters = 32, 6, 1
	if rope {
		a.Model.PositionEmbeddingType = "rope"
	}
	return a
}

// packedRun trains a on ds (training and validation) with a.WorldSize
// in-process ranks and returns the training losses, then the final
// validation loss, and the first step's gathered gradients.
func packedRun(t *testing.T, a Args, ds data.Dataset) ([]float64, *safetensors.File) {
	t.Helper()
	a.DumpGrads = filepath.Join(t.TempDir(), "grads.safetensors")
	a = normalise(a, a.WorldSize)
	if err := a.Validate(a.WorldSize); err != nil {
		t.Fatal(err)
	}
	p := &Prepared{a: a, place: Placement{World: a.WorldSize, Machine: a.WorldSize, Process: a.WorldSize},
		data: &source.Sets{Train: ds, Valid: ds, Vocab: a.Model.VocabSize, Desc: "packed mock data"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results := make([]*Result, a.WorldSize)
	err := local.NewWorld(a.WorldSize, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		r, err := runRank(ctx, g, p, Options{})
		results[g.Rank()] = r
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	grads, err := safetensors.ReadFile(a.DumpGrads)
	if err != nil {
		t.Fatal(err)
	}
	return append(results[0].Losses, results[0].ValidLoss), grads
}

// packingLayout is one parallel layout of the packed-data equivalence test.
type packingLayout struct {
	name  string
	world int
	set   func(a *Args)
}

var packingLayouts = []packingLayout{
	{"tp2/sp", 2, func(a *Args) { a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true }},
	{"cp2/p2p", 2, func(a *Args) { a.Model.ContextParallelSize, a.Model.CPCommType = 2, []string{"p2p"} }},
	{"cp2/a2a", 2, func(a *Args) { a.Model.ContextParallelSize, a.Model.CPCommType = 2, []string{"a2a"} }},
	{"pp2", 2, func(a *Args) { a.Model.PipelineModelParallelSize = 2 }},
	{"dp2", 2, func(*Args) {}},
	{"cp2/tp2/sp", 4, func(a *Args) {
		a.Model.ContextParallelSize, a.Model.CPCommType = 2, []string{"p2p"}
		a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
	}},
	{"tp2/sp/recompute=selective", 2, func(a *Args) {
		a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
		setRecompute(a, "selective")
	}},
	{"cp2/recompute=full", 2, func(a *Args) {
		a.Model.ContextParallelSize, a.Model.CPCommType = 2, []string{"all_gather"}
		setRecompute(a, "full")
	}},
}

// TestPackedDataMatchesSingleRank is the layout-equivalence test of packed
// documents: on data whose rows hold several documents, with position ids
// reset and the attention restricted to each document, TP 2 with sequence
// parallelism, CP 2 (ring and all-to-all), PP 2, DP 2, CP 2 × TP 2 with SP,
// and selective and full recompute (TP 2, CP 2 all_gather) give the one-rank
// loss curve (6 steps and the validation loss) to 1e-5 relative and its
// first-step gathered gradients to 1e-5 (‖g − g₁‖/‖g₁‖ per parameter) —
// with learned absolute positions (where the ids pick the embedding rows),
// with RoPE and reset positions only (the ids set the angles: tokens see
// the earlier documents at their reset positions), and with RoPE and both
// (CP and PP). Each packed one-rank run's first-step gradients differ from
// the unpacked run's by more than 1e-3 for some parameter, 100 times the
// tolerance: the ids and the mask are used.
func TestPackedDataMatchesSingleRank(t *testing.T) {
	for _, c := range []struct {
		name                string
		rope                bool
		positions, segments bool
		layouts             []packingLayout
	}{
		{"learned/positions+segments", false, true, true, packingLayouts},
		{"rope/positions", true, true, false, packingLayouts},
		{"rope/positions+segments", true, true, true, packingLayouts[1:4]},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := packingArgs(1, c.rope)
			mock := data.MockDataset{Seed: a.Seed, Vocab: a.Model.VocabSize, Seq: a.Model.SeqLength}
			ds := packedData{MockDataset: mock, eod: 8, positions: c.positions, segments: c.segments}
			wantLoss, wantGrads := packedRun(t, a, ds)
			_, plain := packedRun(t, a, mock)
			if d := worstGradDiff(t, plain, wantGrads); d < 1e-3 {
				t.Fatalf("the first-step gradients on packed data are within %.2g of the unpacked ones: the test cannot tell", d)
			}
			for _, l := range c.layouts {
				t.Run(l.name, func(t *testing.T) {
					b := packingArgs(l.world, c.rope)
					l.set(&b)
					losses, grads := packedRun(t, b, ds)
					checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-5, 1e-5)
				})
			}
		})
	}
}

// TestPackedDataTrainsEachDocumentAlone: rows of documents that each fill
// a whole row, packed two to a row of twice the length with positions
// reset and segments, give the loss curve and validation loss of the
// unpacked run to 1e-5 (each micro-batch's loss is the mean over the same
// 32 tokens; the position table has 32 rows in both, so the
// initialisation is the same) — the packing identity through the trainer,
// on one rank and CP 2.
func TestPackedDataTrainsEachDocumentAlone(t *testing.T) {
	for _, cpSize := range []int{1, 2} {
		t.Run(fmt.Sprintf("cp%d", cpSize), func(t *testing.T) {
			a := packingArgs(cpSize, false)
			a.Model.SeqLength = 16
			a.Model.ContextParallelSize = cpSize
			a.Model.MaxPositionEmbeddings = 32
			a.GlobalBatchSize = 16 // 8 micro-batches of 2 rows of 16 per step
			mock := data.MockDataset{Seed: a.Seed, Vocab: a.Model.VocabSize, Seq: 16}
			want, _ := packedRun(t, a, mock)
			p := a
			p.Model.SeqLength, p.MicroBatchSize, p.GlobalBatchSize = 32, 1, 8 // 8 micro-batches of 2 documents
			got, _ := packedRun(t, p, pairedRows{mock})
			for i := range want {
				if e := relErr(got[i], want[i]); e > 1e-5 {
					t.Errorf("%s: packed loss %.9f, unpacked %.9f (relative difference %.2g)", lossLabel(i, len(want)), got[i], want[i], e)
				}
			}
		})
	}
}

// pairedRows packs rows 2k and 2k+1 of a 16-token dataset's global batch
// of twice the rows into row k of 32 tokens: positions 0..15 twice,
// segments 0 then 1.
type pairedRows struct{ inner data.MockDataset }

func (d pairedRows) Batch(step data.Step, row0, rows int) data.Batch {
	in := d.inner.Batch(data.Step{Index: step.Index, Rows: 2 * step.Rows, Consumed: 2 * step.Consumed}, 2*row0, 2*rows)
	const s = 16
	out := data.Batch{Rows: rows, Seq: 2 * s, InputIDs: in.InputIDs, Labels: in.Labels, LossMask: in.LossMask,
		PositionIDs: make([]int32, rows*2*s), Segments: make([]int32, rows*2*s)}
	for k := range out.PositionIDs {
		out.PositionIDs[k] = int32(k % s)
		out.Segments[k] = int32(k / s % 2)
	}
	return out
}

// worstGradDiff is the largest ‖g − g₁‖/‖g₁‖ over the parameters of two
// gradient files.
func worstGradDiff(t *testing.T, grads, want *safetensors.File) float64 {
	t.Helper()
	worst := 0.0
	gradDiffs(t, grads, want, func(_ string, e float64) { worst = max(worst, e) })
	return worst
}
