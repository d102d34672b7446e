package plan

import (
	"math"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/pp"
)

// TestActivationsMatchKorthikanti: a device's activations per layer in
// 16 bits are Korthikanti et al. 2022's Table 2 (Korthikanti: GPT's shape,
// dropout on) plus what the paper leaves out: the norms' float32
// statistics (16·sb bytes, over t under sequence parallelism) and, unless
// selective recompute drops the attention core's, its float32
// log-sum-exp rows (4·a·s·b/t). Without flash attention the 5·a·s²·b/t
// bytes of the probabilities are the paper's; full recompute keeps each
// layer's input, 2·sbh.
func TestActivationsMatchKorthikanti(t *testing.T) {
	s, b, a, L := 256.0, 2.0, 8.0, 4
	for _, c := range []struct {
		name      string
		tp        int
		sp        bool
		recompute string
	}{
		{"no parallelism", 1, false, ""},
		{"TP", 4, false, ""},
		{"TP + SP", 4, true, ""},
		{"TP + selective", 4, false, "selective"},
		{"TP + SP + selective", 4, true, "selective"},
		{"full recompute", 4, false, "full"},
	} {
		cfg := config.DefaultTransformerConfig()
		cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = L, 512, int(a), int(s), 1024
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
		paper := Korthikanti(cfg, int(b))
		want := paper
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
			t.Errorf("%s: %g bytes a layer, want %g (Korthikanti's %g)", c.name, got, want, paper)
		}
	}
}

// testHardware is a100-80gb.
func testHardware(t *testing.T) Hardware {
	t.Helper()
	hw, err := LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// TestLinks: a group inside a node uses the node's link; one across nodes
// with k members in each runs k rings on k adapters, at most the node's
// rate; a pipeline message crosses one adapter.
func TestLinks(t *testing.T) {
	hw := testHardware(t)
	for _, c := range []struct {
		tp, cp, dp, pp int
		dp1, pp1       float64
	}{
		{8, 1, 2, 1, 23, 230},     // DP across nodes, one member a node
		{1, 1, 16, 1, 184, 230},   // 8 members a node: 8 × 23
		{2, 1, 8, 1, 92, 230},     // 4 members a node
		{1, 1, 4, 2, 230, 230},    // DP in a node; two stages of 4 fill a node
		{8, 1, 1, 4, 230, 23},     // a stage a node
		{2, 2, 4, 1, 46 * 2, 230}, // the DP·CP group: stride 2, 4 members a node
	} {
		l := newLayout(hw, c.tp, c.cp, c.dp, c.pp)
		if l.dpLink.BusBandwidthGBs != c.dp1 || l.ppLink.BusBandwidthGBs != c.pp1 {
			t.Errorf("TP %d CP %d DP %d PP %d: DP link %g GB/s, pipeline link %g; want %g and %g", c.tp, c.cp, c.dp, c.pp,
				l.dpLink.BusBandwidthGBs, l.ppLink.BusBandwidthGBs, c.dp1, c.pp1)
		}
	}
}

// TestDataParallelOrder: with --overlap-grad-reduce a rank's chunks reduce
// in the order their gradients are complete, and a split backward's
// gradients are complete after its weight-gradient step.
func TestDataParallelOrder(t *testing.T) {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = 4, 256, 4, 128, 1024
	run := Run{Model: cfg, MicroBatchSize: 1, GlobalBatchSize: 8}
	run.DDP.OverlapGradReduce, run.DDP.NumBuckets = true, 100
	hw := testHardware(t)
	p := postPipeline{a: run, c: costModel{d: device{hw: hw, peak: 1e14, elem: 4}, l: newLayout(hw, 1, 1, 8, 1)},
		params: [][]params{{{dense: 1e8}, {dense: 1e8}}}}
	R, _ := p.reduce(params{dense: 1e8})
	ns := func(s float64) int64 { return int64(s * 1e9) }
	// Chunk 1's last backward ends first, then chunk 0's.
	sim := &pp.Simulation{Timeline: &pp.Timeline{Ranks: [][]pp.Span{{
		{Kind: pp.Backward, Chunk: 1, Start: 0, End: ns(R)},
		{Kind: pp.Backward, Chunk: 0, Start: ns(R), End: ns(2 * R)},
	}}}}
	if got, want := p.dataParallel(sim), R/100; math.Abs(got-want) > 1e-6*R {
		t.Errorf("exposed %g s, want %g (chunk 1 reduced while chunk 0's backward runs)", got, want)
	}
	split := []pp.Span{{Kind: pp.Backward, Chunk: 0, Start: 0, End: 1}, {Kind: pp.WeightGrad, Chunk: 0, Start: ns(2), End: ns(3)}}
	if from, to := lastGradient(split, 0); from != 2 || to != 3 {
		t.Errorf("last gradient of a split backward at [%g, %g] s, want [2, 3]", from, to)
	}
}
