package plan

import (
	"testing"

	"github.com/gotron/gotron/config"
)

// TestActivationsMatchKorthikanti: a device's activations per layer in
// 16 bits are Korthikanti et al. 2022's Table 2 (GPT's shape, dropout on)
// plus what the paper leaves out: the norms' float32 statistics (16·sb
// bytes, over t under sequence parallelism) and, unless selective
// recompute drops the attention core's, its float32 log-sum-exp rows
// (4·a·s·b/t). Without flash attention the 5·a·s²·b/t bytes of the
// probabilities are the paper's; full recompute keeps each layer's input,
// 2·sbh.
func TestActivationsMatchKorthikanti(t *testing.T) {
	s, b, h, a, L := 256.0, 2.0, 512.0, 8.0, 4
	for _, c := range []struct {
		name      string
		tp        int
		sp        bool
		recompute string
		paper     func(t float64) float64
	}{
		{"no parallelism", 1, false, "", func(float64) float64 { return s * b * h * (34 + 5*a*s/h) }},
		{"TP", 4, false, "", func(t float64) float64 { return s * b * h * (10 + 24/t + 5*a*s/(h*t)) }},
		{"TP + SP", 4, true, "", func(t float64) float64 { return s * b * h / t * (34 + 5*a*s/h) }},
		{"TP + selective", 4, false, "selective", func(t float64) float64 { return s * b * h * (10 + 24/t) }},
		{"TP + SP + selective", 4, true, "selective", func(t float64) float64 { return s * b * h / t * 34 }},
		{"full recompute", 4, false, "full", func(float64) float64 { return 2 * s * b * h }},
	} {
		cfg := config.DefaultTransformerConfig()
		cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = L, int(h), int(a), int(s), 1024
		cfg.HiddenDropout, cfg.AttentionDropout = 0.1, 0.1
		cfg.TensorModelParallelSize, cfg.SequenceParallel, cfg.RecomputeGranularity = c.tp, c.sp, c.recompute
		cfg.BF16 = true
		if c.recompute == "full" {
			cfg.RecomputeMethod, cfg.RecomputeNumLayers = "uniform", 1
		}
		run := Run{Model: cfg, MicroBatchSize: int(b), GlobalBatchSize: int(b)}
		tp := float64(c.tp)
		post := postPipeline{a: run, c: costModel{d: device{elem: 2}, l: layout{tp: c.tp, cp: 1, dp: 1, pp: 1}, cfg: cfg, b: b, flash: false}}
		got := post.chunkActivations(config.PipelineChunk{NumLayers: L}) / float64(L)
		want := c.paper(tp)
		if c.recompute != "full" {
			r := 1.0
			if c.sp {
				r = 1 / tp
			}
			want += 16 * s * b * r
			if c.recompute == "" {
				want += 4 * a * s * b / tp
			}
		}
		if got != want {
			t.Errorf("%s: %g bytes a layer, want %g (Korthikanti's %g)", c.name, got, want, c.paper(tp))
		}
	}
}
