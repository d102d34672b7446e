package gpt_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// splitCase is one model of TestBackwardSplitMatches.
type splitCase struct {
	name string
	tp   int
	set  func(*config.TransformerConfig)
	bf16 bool
}

// TestBackwardSplitMatches: a split backward (autograd.BackwardSplit, the
// weight gradients queued and run afterwards, as zero-bubble schedules
// do) gives every parameter of the GPT the gradient the unsplit backward
// gives, bit for bit, over two accumulated micro-batches: GPT-2 and Llama
// shapes (RMSNorm, SwiGLU, RoPE, grouped-query attention, q/k norms),
// dropout, bf16 weights, unfused weight gradients, MoE layers with
// sequential and grouped experts and a shared expert, full and selective
// recompute, and tensor parallelism with sequence parallelism on two
// ranks.
func TestBackwardSplitMatches(t *testing.T) {
	llama := func(c *config.TransformerConfig) {
		c.Normalization, c.ActivationFunc, c.GatedLinearUnit = config.RMSNormType, config.SiLU, true
		c.PositionEmbeddingType, c.NumQueryGroups, c.QKLayernorm = config.RoPE, 2, true
		c.AddBiasLinear, c.ShareEmbeddingsAndOutputWeights = false, false
	}
	moe := func(grouped bool) func(*config.TransformerConfig) {
		return func(c *config.TransformerConfig) {
			c.AddBiasLinear, c.BiasActivationFusion = false, false
			c.NumMoEExperts, c.MoELayerFreq, c.MoERouterTopK, c.MoESharedExpertIntermediateSize = 4, []int{0, 1}, 2, 32
			c.MoEGroupedGEMM, c.MoEAuxLossCoeff = grouped, 0.01
		}
	}
	for _, c := range []splitCase{
		{name: "gpt2", set: func(*config.TransformerConfig) {}},
		{name: "dropout", set: func(c *config.TransformerConfig) { c.HiddenDropout, c.AttentionDropout = 0.1, 0.1 }},
		{name: "bf16-unfused", bf16: true, set: func(c *config.TransformerConfig) { c.GradientAccumulationFusion = false }},
		{name: "llama", set: llama},
		{name: "moe-sequential", set: moe(false)},
		{name: "moe-grouped", set: moe(true)},
		{name: "recompute-full", set: func(c *config.TransformerConfig) {
			c.RecomputeGranularity, c.RecomputeMethod, c.RecomputeNumLayers = "full", "uniform", 1
		}},
		{name: "recompute-selective", set: func(c *config.TransformerConfig) { c.RecomputeGranularity = "selective" }},
		{name: "tp2-sp", tp: 2, set: func(c *config.TransformerConfig) { c.SequenceParallel = true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := max(c.tp, 1)
			err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				whole, err := splitGrads(ctx, c, g, false)
				if err != nil {
					return err
				}
				split, err := splitGrads(ctx, c, g, true)
				if err != nil {
					return err
				}
				for name, w := range whole {
					s := split[name]
					for i := range w {
						if math.Float32bits(w[i]) != math.Float32bits(s[i]) {
							t.Errorf("rank %d: %s[%d]: split %v, unsplit %v", g.Rank(), name, i, s[i], w[i])
							break
						}
					}
				}
				if len(whole) == 0 || len(split) != len(whole) {
					t.Errorf("rank %d: %d gradients split, %d unsplit", g.Rank(), len(split), len(whole))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// splitGrads builds case c's model on g (the same weights and dropout
// streams every call) and runs two micro-batches forward and backward,
// split or not, returning every parameter's gradient as float32.
func splitGrads(ctx context.Context, c splitCase, g comm.Group, split bool) (map[string][]float32, error) {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = 2, 32, 4, 16, 64
	cfg.MaxPositionEmbeddings, cfg.HiddenDropout, cfg.AttentionDropout = 16, 0, 0
	cfg.GradientAccumulationFusion, cfg.TensorModelParallelSize = true, max(c.tp, 1)
	c.set(&cfg)
	var tpg comm.Group
	if c.tp > 1 {
		tpg = g
	}
	m, err := gpt.NewParallel(cfg, rng.New(1), tpg)
	if err != nil {
		return nil, err
	}
	if c.bf16 {
		for _, p := range m.Parameters() {
			p.Value = tensor.ToHalf(p.Value, tensor.BFloat16)
			p.Grad = tensor.NewOf(tensor.BFloat16, p.Value.Shape()...)
		}
	}
	rnd := &gpt.Randomness{Default: rng.New(5)}
	for micro := range 2 {
		b := data.MockDataset{Seed: 7, Vocab: cfg.VocabSize, Seq: cfg.SeqLength}.Batch(data.ConstantStep(0, 4), 2*micro, 2)
		tape := autograd.NewTape(ctx)
		tape.SetWorkers(2) // the experts' GEMMs run side by side, queueing W's from goroutines
		losses, err := m.ForwardInputs(tape, gpt.Inputs{IDs: b.InputIDs, Labels: b.Labels, Rows: b.Rows, Seq: b.Seq}, rnd, nil)
		if err != nil {
			return nil, err
		}
		loss := gpt.MaskedMeanLoss(tape, losses, b, 0.5)
		if !split {
			if err := autograd.Backward(tape, loss, nil); err != nil {
				return nil, err
			}
			continue
		}
		w, err := autograd.BackwardSplit(tape, loss, nil)
		if err != nil {
			return nil, err
		}
		if err := w.Run(ctx); err != nil {
			return nil, err
		}
	}
	out := map[string][]float32{}
	for _, p := range m.Parameters() {
		if p.Grad != nil {
			out[p.Name] = p.Grad.Float32().Data()
		}
	}
	return out, nil
}
