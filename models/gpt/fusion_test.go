package gpt_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// TestGradientAccumulationFusion: gradient_accumulation_fusion reaches
// every linear layer of the model — attention, MLP, the experts and their
// shared expert, the output layer — and nothing else: with bfloat16
// weights the unfused weight gradients (the product rounded to bfloat16
// before it is added) differ from the fused ones, and every other
// gradient (norms, embeddings, the router) is bitwise the same; with the
// experts run one by one and as a grouped GEMM.
func TestGradientAccumulationFusion(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(map[bool]string{false: "sequential", true: "grouped"}[grouped], func(t *testing.T) { checkFusion(t, grouped) })
	}
}

func checkFusion(t *testing.T, grouped bool) {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads = 2, 32, 4
	cfg.SeqLength, cfg.VocabSize = 16, 64
	cfg.HiddenDropout, cfg.AttentionDropout = 0, 0
	cfg.AddBiasLinear, cfg.BiasActivationFusion, cfg.ShareEmbeddingsAndOutputWeights = false, false, false
	cfg.NumMoEExperts, cfg.MoELayerFreq, cfg.MoERouterTopK, cfg.MoESharedExpertIntermediateSize = 4, []int{0, 1}, 2, 32
	cfg.MoEGroupedGEMM = grouped
	grads := func(fusion bool) map[string][]float32 {
		c := cfg
		c.GradientAccumulationFusion = fusion
		m, err := gpt.New(c, rng.New(1))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Parameters() {
			p.Value = tensor.ToHalf(p.Value, tensor.BFloat16)
		}
		b := data.MockDataset{Seed: 7, Vocab: c.VocabSize, Seq: c.SeqLength}.Batch(data.ConstantStep(0, 2), 0, 2)
		tape := autograd.NewTape(context.Background())
		losses, err := m.Forward(tape, b.InputIDs, b.Labels, b.Rows, b.Seq, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := autograd.Backward(tape, gpt.MaskedMeanLoss(tape, losses, b, 1), nil); err != nil {
			t.Fatal(err)
		}
		out := map[string][]float32{}
		for _, p := range m.Parameters() {
			if p.Grad != nil {
				out[p.Name] = p.Grad.Float32().Data()
			}
		}
		return out
	}
	fused, unfused := grads(true), grads(false)
	linear := 0
	for name, f := range fused {
		u := unfused[name]
		isLinear := strings.HasSuffix(name, ".weight") && (strings.Contains(name, "linear_") || strings.HasPrefix(name, "output_layer"))
		same := slices.Equal(f, u)
		switch {
		case isLinear && same:
			t.Errorf("%s: the same gradient fused and unfused (the option did not reach it)", name)
		case !isLinear && !same:
			t.Errorf("%s: not a linear layer's weight, but its gradient changed", name)
		}
		if isLinear {
			linear++
		}
	}
	if linear < 10 {
		t.Errorf("only %d linear weights among %d gradients", linear, len(fused))
	}
}
