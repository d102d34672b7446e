package plan

import (
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/models/gpt"
)

// moeModel is a small Llama-shaped model whose every second layer is a MoE
// layer of 4 SwiGLU experts of width 32.
func moeModel() config.TransformerConfig {
	m := config.DefaultTransformerConfig()
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads, m.SeqLength, m.VocabSize = 4, 64, 4, 32, 128
	m.MaxPositionEmbeddings = 32
	m.Normalization, m.ActivationFunc, m.GatedLinearUnit = config.RMSNormType, config.SiLU, true
	m.NumMoEExperts, m.MoEFFNHiddenSize, m.MoELayerFreq = 4, 32, []int{2}
	return m
}

// TestExpertsCounted: a MoE model's routed experts are E·(f₁·h + h·f)
// per MoE layer (E·(f₁ + h) more with biases), as many as the model's
// local_experts tensors, and the parameter count is gpt.NumParameters up
// to 16384 layers, its per-layer extrapolation beyond.
func TestExpertsCounted(t *testing.T) {
	m := moeModel()
	h := float64(m.HiddenSize)
	if got, want := expertCount(m), 2.0*4*(2*32*h+h*32+2*32+h); got != want {
		t.Errorf("expert parameters %g, want %g", got, want)
	}
	for _, bias := range []bool{false, true} {
		b := m
		b.AddBiasLinear = bias
		b.MoELayerFreq, b.MTPNumLayers, b.PositionEmbeddingType = []int{1}, 1, config.RoPE // (MoE depths)
		specs, err := gpt.ChunkParamSpecs(b, 1, gpt.WholeModel(b))
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, s := range specs {
			if strings.Contains(s.Name, ".local_experts.") {
				n += float64(s.Numel())
			}
		}
		if got := expertCount(b); got != n {
			t.Errorf("add_bias_linear %v: expert parameters %g, the model's local_experts tensors %g", bias, got, n)
		}
		if got, want := parameterCount(b), float64(gpt.NumParameters(b)); got != want {
			t.Errorf("add_bias_linear %v: parameters %g, want gpt.NumParameters's %g", bias, got, want)
		}
	}
	if got, want := parameterCount(m), float64(gpt.NumParameters(m)); got != want {
		t.Errorf("parameters %g, want gpt.NumParameters's %g", got, want)
	}
	d := config.DefaultTransformerConfig()
	d.NumLayers, d.HiddenSize, d.NumAttentionHeads, d.SeqLength, d.VocabSize, d.MaxPositionEmbeddings = 1<<14, 64, 4, 32, 128, 32
	exact := float64(gpt.NumParameters(d))
	d.NumLayers++
	if got, want := parameterCount(d)-exact, exact/float64(1<<14); math.Abs(got-want) > want {
		t.Errorf("one more layer beyond 16384 adds %g parameters, want about %g", got, want)
	}
}

// TestMemoryShares: data-parallel copies and the distributed optimizer's
// shards, 16-bit state and a save's copy, on the plan's own Run.
func TestMemoryShares(t *testing.T) {
	r := Run{Model: config.DefaultTransformerConfig(), DDP: config.DefaultDDPConfig(), MicroBatchSize: 1, GlobalBatchSize: 2}
	r.Model.NumLayers, r.Model.HiddenSize, r.Model.NumAttentionHeads, r.Model.SeqLength, r.Model.VocabSize = 2, 64, 4, 32, 128
	r.Model.MaxPositionEmbeddings = 32
	p := float64(gpt.NumParameters(r.Model))
	one := Memory(r, 1, 1)
	if one.Weights != 4*p || one.Gradients != 4*p || one.Optimizer != 8*p || one.Checkpoint != 0 {
		t.Fatalf("one rank: %+v, want 4/4/8 bytes × %g parameters and no checkpoint", one, p)
	}
	r.DDP.UseDistributedOptimizer = true
	if two := Memory(r, 2, 2); two.Weights != 8*p || two.Optimizer != 8*p {
		t.Errorf("two ranks with the distributed optimizer: %+v, want two copies of the weights and one of Adam", two)
	}
	r.DDP.UseDistributedOptimizer = false
	r.Model.BF16, r.Save, r.SaveOptim = true, true, true
	if bf := Memory(r, 1, 1); bf.Weights != 2*p || bf.Gradients != 4*p || bf.Optimizer != 12*p || bf.Checkpoint != 12*p {
		t.Errorf("bf16 with a save: %+v, want 2/4/12 bytes per parameter and a 12-byte copy", bf)
	}
	r.SGD, r.SGDMomentum = true, 0.9 // one momentum buffer instead of two moments
	if sgd := Memory(r, 1, 1); sgd.Optimizer != 8*p || sgd.Checkpoint != 8*p {
		t.Errorf("bf16 SGD with momentum: %+v, want 8 bytes of optimizer state per parameter and an 8-byte copy", sgd)
	}
	r.SGDMomentum = 0
	if sgd := Memory(r, 1, 1); sgd.Optimizer != 4*p || sgd.Checkpoint != 4*p {
		t.Errorf("bf16 SGD without momentum: %+v, want the main parameters alone (4 bytes)", sgd)
	}
}

// TestZeroBubbleInFlight: under ZB-H1 every stage counts P microbatches in
// flight, under ZB-H2 2P − 1, where 1F1B's stage i counts P − i: at P = 4
// and 8 microbatches 16 and 28 against 10 stage-microbatches.
func TestZeroBubbleInFlight(t *testing.T) {
	r := Run{Model: config.DefaultTransformerConfig(), DDP: config.DefaultDDPConfig(), MicroBatchSize: 1, GlobalBatchSize: 8}
	r.Model.NumLayers, r.Model.HiddenSize, r.Model.NumAttentionHeads, r.Model.SeqLength, r.Model.VocabSize = 4, 64, 4, 32, 128
	r.Model.MaxPositionEmbeddings, r.Model.PipelineModelParallelSize = 32, 4
	one := Memory(r, 4, 4).Activations
	r.PipelineSchedule = "zb-h1"
	if zb := Memory(r, 4, 4).Activations; math.Abs(zb/one-16.0/10) > 1e-12 {
		t.Errorf("ZB-H1 activations %g, 1F1B %g: ratio %g, want 1.6", zb, one, zb/one)
	}
	r.PipelineSchedule = "zb-h2"
	if zb := Memory(r, 4, 4).Activations; math.Abs(zb/one-28.0/10) > 1e-12 {
		t.Errorf("ZB-H2 activations %g, 1F1B %g: ratio %g, want 2.8", zb, one, zb/one)
	}
}

// TestDeferEmbeddingWgradMemory: defer_embedding_wgrad_compute adds one
// head's activations per deferred microbatch (all 8, or the limit's 3).
func TestDeferEmbeddingWgradMemory(t *testing.T) {
	r := Run{Model: config.DefaultTransformerConfig(), DDP: config.DefaultDDPConfig(), MicroBatchSize: 1, GlobalBatchSize: 8}
	r.Model.NumLayers, r.Model.HiddenSize, r.Model.NumAttentionHeads, r.Model.SeqLength, r.Model.VocabSize = 4, 64, 4, 32, 128
	r.Model.MaxPositionEmbeddings, r.Model.PipelineModelParallelSize = 32, 4
	head := float64(gpt.EstimateActivations(r.Model, 1).Head)
	base := Memory(r, 4, 4).Activations
	r.Model.DeferEmbeddingWgradCompute = true
	for _, c := range []struct{ limit, n int }{{0, 8}, {3, 3}, {20, 8}} {
		r.Model.WgradDeferralLimit = c.limit
		if got := Memory(r, 4, 4).Activations - base; math.Abs(got-float64(c.n)*head) > 1e-6*head {
			t.Errorf("limit %d: %g bytes more, want %d heads of %g", c.limit, got, c.n, head)
		}
	}
}
