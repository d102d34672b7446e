package dp

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor/rng"
)

func tinyConfig() config.TransformerConfig {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.SeqLength, c.VocabSize = 1, 16, 2, 8, 32
	c.HiddenDropout, c.AttentionDropout = 0, 0
	return c
}

const rowsTotal = 8

// accumulate runs forward and backward over rows [row0, row0+rows) of the
// global batch, one row per micro-batch, each loss scaled by 1/rowsTotal·
// (rows per rank), as the trainer does with rows/rank micro-batches.
func accumulate(t *testing.T, tape *autograd.Tape, m *gpt.Model, row0, rows, micro int) {
	t.Helper()
	ds := data.MockDataset{Seed: 7, Vocab: m.Config.VocabSize, Seq: m.Config.SeqLength}
	for k := 0; k < rows; k++ {
		b := ds.Batch(0, rowsTotal, row0+k, 1)
		losses, err := m.Forward(tape, b.InputIDs, b.Labels, 1, b.Seq, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if err := autograd.Backward(tape, gpt.MaskedMeanLoss(tape, losses, b, 1/float32(micro)), nil); err != nil {
			t.Error(err)
			return
		}
	}
}

// serialGrads is the reference: one rank, the whole global batch.
func serialGrads(t *testing.T) map[string][]float32 {
	m, err := gpt.New(tinyConfig(), rng.New(3))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(m.Parameters(), nil, config.DefaultDDPConfig(), false)
	if err != nil {
		t.Fatal(err)
	}
	accumulate(t, autograd.NewTape(context.Background()), m, 0, rowsTotal, rowsTotal)
	if err := d.FinishGradSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, p := range m.Parameters() {
		out[p.Name] = append([]float32(nil), p.Grad.Data()...)
	}
	return out
}

// TestGradientsMatchSingleRank splits the global batch over 2 and 4
// data-parallel ranks and checks every rank's reduced gradient against the
// single-rank gradient (relative 1e-6: the sums are ordered differently).
func TestGradientsMatchSingleRank(t *testing.T) {
	want := serialGrads(t)
	for _, n := range []int{2, 4} {
		for _, avg := range []bool{false, true} {
			cfg := config.DefaultDDPConfig()
			cfg.AverageInCollective = avg
			err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				m, err := gpt.New(tinyConfig(), rng.New(3))
				if err != nil {
					return err
				}
				d, err := New(m.Parameters(), g, cfg, false)
				if err != nil {
					return err
				}
				per := rowsTotal / n
				accumulate(t, autograd.NewTape(ctx), m, g.Rank()*per, per, per)
				if err := d.StartGradSync(ctx); err != nil {
					return err
				}
				if err := FinalizeModelGrads(ctx, []*DDP{d}, FinalizeOptions{}); err != nil {
					return err
				}
				for _, p := range m.Parameters() {
					if e := rel(p.Grad.Data(), want[p.Name]); e > 1e-6 {
						t.Errorf("dp=%d avg=%v rank %d: %s differs from one rank by %.3g", n, avg, g.Rank(), p.Name, e)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func rel(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i] - want[i])
		d += e * e
		n += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / math.Max(n, 1e-30))
}

func TestBufferViewsAndZeroing(t *testing.T) {
	m, _ := gpt.New(tinyConfig(), rng.New(3))
	d, err := New(m.Parameters(), nil, config.DefaultDDPConfig(), false)
	if err != nil {
		t.Fatal(err)
	}
	local := 0
	for _, p := range m.Parameters() {
		local += p.Value.Len()
	}
	if len(d.GradData) != local {
		t.Fatalf("buffer has %d elements, the rank's parameters %d", len(d.GradData), local)
	}
	// The last parameter comes first in the buffer (backward order).
	last := m.Parameters()[len(m.Parameters())-1]
	last.Grad.Data()[0] = 5
	if d.GradData[0] != 5 {
		t.Errorf("the last parameter's gradient is not at the start of the buffer")
	}
	d.ScaleGradients(2)
	if last.Grad.Data()[0] != 10 {
		t.Errorf("ScaleGradients: %v, want 10", last.Grad.Data()[0])
	}
	d.ZeroGradBuffer()
	for _, v := range d.GradData {
		if v != 0 {
			t.Fatal("ZeroGradBuffer left a non-zero gradient")
		}
	}
}

func TestBroadcastParams(t *testing.T) {
	err := local.NewWorld(3, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, _ := gpt.New(tinyConfig(), rng.New(uint64(10+g.Rank()))) // different weights per rank
		d, err := New(m.Parameters(), g, config.DefaultDDPConfig(), false)
		if err != nil {
			return err
		}
		if err := d.BroadcastParams(ctx); err != nil {
			return err
		}
		ref, _ := gpt.New(tinyConfig(), rng.New(10))
		for i, p := range m.Parameters() {
			if rel(p.Value.Data(), ref.Parameters()[i].Value.Data()) != 0 {
				t.Errorf("rank %d: %s differs from rank 0's after broadcast", g.Rank(), p.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNoSyncDefersStart(t *testing.T) {
	m, _ := gpt.New(tinyConfig(), rng.New(3))
	d, _ := New(m.Parameters(), nil, config.DefaultDDPConfig(), false)
	resume := d.NoSync()
	d.StartGradSync(context.Background())
	if d.pending {
		t.Error("StartGradSync inside NoSync marked the gradients ready")
	}
	resume()
	d.StartGradSync(context.Background())
	if !d.pending {
		t.Error("StartGradSync after NoSync did not mark the gradients ready")
	}
}

// TestDeadRankStopsOthers kills rank 1 between its backward and the
// gradient all-reduce: the other ranks, waiting in the all-reduce, must
// return promptly (well within the timeout) with an error naming rank 1.
func TestDeadRankStopsOthers(t *testing.T) {
	const timeout = 20 * time.Second
	start := time.Now()
	err := local.NewWorld(3, comm.Options{Timeout: timeout}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, _ := gpt.New(tinyConfig(), rng.New(3))
		d, err := New(m.Parameters(), g, config.DefaultDDPConfig(), false)
		if err != nil {
			return err
		}
		accumulate(t, autograd.NewTape(ctx), m, g.Rank(), 1, 1)
		if g.Rank() == 1 {
			panic("rank 1 lost its machine")
		}
		return d.FinishGradSync(ctx)
	})
	if err == nil {
		t.Fatal("no error")
	}
	if el := time.Since(start); el > timeout/2 {
		t.Errorf("the surviving ranks took %v to stop", el)
	}
	var re *local.RunError
	if !errors.As(err, &re) || re.Rank != 1 || !strings.Contains(err.Error(), "lost its machine") {
		t.Fatalf("error does not name rank 1 and its cause: %v", err)
	}
	for r, e := range re.Errs {
		var pe *comm.PeerError
		if r != 1 && (!errors.As(e, &pe) || pe.FailedRank != 1) {
			t.Errorf("rank %d returned %v, want a peer error naming rank 1", r, e)
		}
	}
}
