package gpt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/internal/gptref"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// The fixture in testdata/gpt_ref comes from an independent PyTorch model
// (tools/torchref). Regenerate it with
//
//	/usr/bin/python3 tools/torchref/gpt_ref.py --out testdata/gpt_ref
func readFixture(t *testing.T, name string) (gptref.Fixture, config.TransformerConfig) {
	t.Helper()
	f, err := gptref.Load("../../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Config.Model()
}

// TestGradientsMatchPyTorch runs each fixture's first global batch (two
// micro-batches) and compares every parameter's gradient with PyTorch's:
// ‖g − g_ref‖/‖g_ref‖ ≤ 1e-5 per parameter. The fixtures are the GPT-2
// shape, a Llama shape (RMSNorm, SwiGLU, RoPE, 2 query groups, untied, no
// biases) and three sets of the other options (tools/torchref/README.md).
func TestGradientsMatchPyTorch(t *testing.T) {
	for _, name := range gptref.Fixtures {
		t.Run(name, func(t *testing.T) { testGradientsMatchPyTorch(t, name) })
	}
}

func testGradientsMatchPyTorch(t *testing.T, name string) {
	f, cfg := readFixture(t, name)
	fc := f.Config
	m, err := New(cfg, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	init, err := safetensors.ReadFile(f.Init())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadTensors(init, "init.safetensors"); err != nil {
		t.Fatal(err)
	}
	ds := data.MockDataset{Seed: fc.Seed, Vocab: fc.VocabSize, Seq: fc.SeqLength}
	tape := autograd.NewTape(context.Background())
	micro := fc.GlobalBatchSize / fc.MicroBatchSize
	for k := 0; k < micro; k++ {
		b := ds.Batch(data.ConstantStep(0, fc.GlobalBatchSize), k*fc.MicroBatchSize, fc.MicroBatchSize)
		var mtp []data.Batch
		var in []MTPInputs
		for d := range cfg.MTPNumLayers {
			mtp = append(mtp, MTPBatch(b, d))
			in = append(in, MTPInputs{IDs: mtp[d].InputIDs, Labels: mtp[d].Labels})
		}
		losses, err := m.ForwardInputs(tape, Inputs{IDs: b.InputIDs, Labels: b.Labels, Rows: b.Rows, Seq: b.Seq,
			MoEAuxLossScale: 1 / float32(micro), MTP: in}, nil, nil) // the schedule's backward scale of the MoE losses
		if err != nil {
			t.Fatal(err)
		}
		loss := mtpObjective(tape, losses, b, mtp, cfg.MTPLossScale(), 1/float32(micro))
		if err := autograd.Backward(tape, loss, nil); err != nil {
			t.Fatal(err)
		}
	}
	want, err := safetensors.ReadFile(f.Grads())
	if err != nil {
		t.Fatal(err)
	}
	grads, err := m.GradTensors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for _, g := range grads {
		wt, ok := want.Get(g.Name)
		if !ok {
			t.Fatalf("fixture has no gradient for %s", g.Name)
		}
		w, _ := wt.Float32()
		got, _ := g.Float32()
		rel := numtest.RelNorm(got, w)
		worst = math.Max(worst, rel)
		if rel > 1e-5 {
			t.Errorf("%s: ‖g − g_torch‖/‖g_torch‖ = %.3g > 1e-5", g.Name, rel)
		}
	}
	t.Logf("largest relative gradient difference from PyTorch: %.3g", worst)
	checkMoEStats(t, f, m)
}

// checkMoEStats compares the MoE layers' statistics of the first step with
// the fixture's moe.json (when it has one): the load-balancing (or
// sequence-level) and z losses as Megatron's tracker records them, the
// mean over the microbatches to 1e-6, and the tokens each expert processed
// exactly.
func checkMoEStats(t *testing.T, f gptref.Fixture, m *Model) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.Dir, "moe.json"))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		LB     [][]float64     `json:"load_balancing_loss"`
		SeqLB  [][]float64     `json:"seq_load_balancing_loss"`
		Z      [][]float64     `json:"z_loss"`
		Tokens [][][][]float32 `json:"tokens_per_expert"` // [step][microbatch][layer][expert]
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	lb := rec.LB
	if lb == nil {
		lb = rec.SeqLB
	}
	layers := m.MoELayers()
	if len(layers) == 0 || len(lb) == 0 || len(lb[0]) != len(layers) {
		t.Fatalf("%d MoE layers, moe.json has %v losses", len(layers), lb)
	}
	for l, ml := range layers {
		st := ml.Stats
		got := []float64{st.LoadBalancing / float64(st.Passes)}
		want := []float64{lb[0][l]}
		if rec.Z != nil {
			got, want = append(got, st.Z/float64(st.Passes)), append(want, rec.Z[0][l])
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-6*math.Abs(want[i]) {
				t.Errorf("MoE layer %d: logged loss %d is %.9g, PyTorch %.9g", l, i, got[i], want[i])
			}
		}
		tokens := make([]float32, len(st.Tokens))
		for _, mb := range rec.Tokens[0] {
			for e, n := range mb[l] {
				tokens[e] += n
			}
		}
		if fmt.Sprint(st.Tokens) != fmt.Sprint(tokens) {
			t.Errorf("MoE layer %d: tokens per expert %v, PyTorch %v", l, st.Tokens, tokens)
		}
	}
}

// mtpObjective is the reference's objective of a micro-batch (scaled by
// scale): its masked mean loss plus, per MTP depth k of mtp, f/D times the
// depth's masked mean loss (its losses follow the main ones in losses);
// MaskedMeanLoss without MTP.
func mtpObjective(t *autograd.Tape, losses *autograd.Var, b data.Batch, mtp []data.Batch, f float64, scale float32) *autograd.Var {
	if len(mtp) == 0 {
		return MaskedMeanLoss(t, losses, b, scale)
	}
	var w []float32
	for k, m := range append([]data.Batch{b}, mtp...) {
		mask := SequenceFirst(m.LossMask, m.Rows, m.Seq)
		var n float64
		for _, v := range mask {
			n += float64(v)
		}
		c := float64(scale) / max(n, 1)
		if k > 0 {
			c *= f
		}
		for _, v := range mask {
			w = append(w, float32(c)*v)
		}
	}
	return autograd.WeightedSum(t, losses, tensor.FromSlice(w, len(w)))
}
