package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// pipelined returns a valid transformer config with n layers on pp ranks
// and vpp virtual stages (0: unset).
func pipelined(n, pp, vpp int) TransformerConfig {
	c := validTransformer()
	c.NumLayers, c.PipelineModelParallelSize, c.VirtualPipelineModelParallelSize = n, pp, vpp
	if pp > 1 {
		c.PipelineDType = Float32
	}
	return c
}

// chunkGrid renders chunks as "p0: E0+1 | 4+1; p1: ..." where each chunk is
// [E]offset+count[m…][L].
func chunkGrid(chunks [][]PipelineChunk) string {
	var ranks []string
	for p, row := range chunks {
		var cs []string
		for _, ch := range row {
			s := fmt.Sprintf("%d+%d", ch.LayerOffset, ch.NumLayers)
			if ch.PreProcess {
				s = "E" + s
			}
			s += strings.Repeat("m", ch.MTPLayers)
			if ch.PostProcess {
				s += "L"
			}
			cs = append(cs, s)
		}
		ranks = append(ranks, fmt.Sprintf("p%d: %s", p, strings.Join(cs, " | ")))
	}
	return strings.Join(ranks, "; ")
}

// TestPipelineChunks checks the placement of every way of saying it against
// hand-computed offsets (the reference's formulas evaluated by hand).
func TestPipelineChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*TransformerConfig)
		want   string
	}{
		{"no pipelining", func(c *TransformerConfig) { *c = pipelined(5, 1, 0) }, "p0: E0+5L"},
		{"no pipelining, account for E and L", func(c *TransformerConfig) {
			*c = pipelined(5, 1, 0)
			c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
		}, "p0: E0+5L"},
		{"no pipelining, mtp", func(c *TransformerConfig) { *c = pipelined(5, 1, 0); c.MTPNumLayers = 2 }, "p0: E0+5mmL"},
		{"even", func(c *TransformerConfig) { *c = pipelined(8, 4, 0) }, "p0: E0+2; p1: 2+2; p2: 4+2; p3: 6+2L"},
		// The reference's comment: 8 layers, 2 stages, 2 virtual stages:
		// stage 0 [0 1] [4 5], stage 1 [2 3] [6 7].
		{"even, vpp 2", func(c *TransformerConfig) { *c = pipelined(8, 2, 2) }, "p0: E0+2 | 4+2; p1: 2+2 | 6+2L"},
		// 8 layers, 2 stages, 4 virtual stages: [0] [2] [4] [6] / [1] [3] [5] [7].
		{"even, vpp 4", func(c *TransformerConfig) { *c = pipelined(8, 2, 4) }, "p0: E0+1 | 2+1 | 4+1 | 6+1; p1: 1+1 | 3+1 | 5+1 | 7+1L"},
		{"even, vpp 1 (interleaved, one chunk)", func(c *TransformerConfig) { *c = pipelined(6, 3, 1) }, "p0: E0+2; p1: 2+2; p2: 4+2L"},
		{"num_layers_per_virtual_pipeline_stage 1", func(c *TransformerConfig) {
			*c = pipelined(8, 2, 0)
			c.NumLayersPerVirtualPipelineStage = 1
		}, "p0: E0+1 | 2+1 | 4+1 | 6+1; p1: 1+1 | 3+1 | 5+1 | 7+1L"},
		{"num_layers_per_virtual_pipeline_stage = layers per rank", func(c *TransformerConfig) {
			*c = pipelined(8, 2, 0)
			c.NumLayersPerVirtualPipelineStage = 4
		}, "p0: E0+4; p1: 4+4L"},
		{"uneven first and last", func(c *TransformerConfig) {
			*c = pipelined(10, 4, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 1, 3
		}, "p0: E0+1; p1: 1+3; p2: 4+3; p3: 7+3L"},
		{"uneven first", func(c *TransformerConfig) {
			*c = pipelined(9, 3, 0)
			c.NumLayersInFirstPipelineStage = 1
		}, "p0: E0+1; p1: 1+4; p2: 5+4L"},
		{"uneven last", func(c *TransformerConfig) {
			*c = pipelined(9, 3, 0)
			c.NumLayersInLastPipelineStage = 1
		}, "p0: E0+4; p1: 4+4; p2: 8+1L"},
		{"uneven, one rank holding all", func(c *TransformerConfig) {
			*c = pipelined(4, 1, 0)
			c.NumLayersInFirstPipelineStage = 4
		}, "p0: E0+4L"},
		{"uneven first and last, pp 2", func(c *TransformerConfig) {
			*c = pipelined(7, 2, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 3, 4
		}, "p0: E0+3; p1: 3+4L"},
		// T = 2/2 + 12/2 + 2/2 = 8; middle ranks hold 6/2 = 3 per chunk.
		{"uneven first and last, vpp 2", func(c *TransformerConfig) {
			*c = pipelined(16, 4, 2)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 2, 2
		}, "p0: E0+1 | 8+1; p1: 1+3 | 9+3; p2: 4+3 | 12+3; p3: 7+1 | 15+1L"},
		{"uneven first, vpp 2", func(c *TransformerConfig) {
			*c = pipelined(10, 3, 2)
			c.NumLayersInFirstPipelineStage = 2
		}, "p0: E0+1 | 5+1; p1: 1+2 | 6+2; p2: 3+2 | 8+2L"},
		{"uneven last, vpp 2", func(c *TransformerConfig) {
			*c = pipelined(10, 3, 2)
			c.NumLayersInLastPipelineStage = 2
		}, "p0: E0+2 | 5+2; p1: 2+2 | 7+2; p2: 4+1 | 9+1L"},
		// No middle rank: the reference divides 0 by 0 here; the last rank
		// follows the first.
		{"uneven first and last, pp 2, vpp 2", func(c *TransformerConfig) {
			*c = pipelined(8, 2, 2)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 4, 4
		}, "p0: E0+2 | 4+2; p1: 2+2 | 6+2L"},
		{"account for embedding", func(c *TransformerConfig) {
			*c = pipelined(7, 4, 0)
			c.AccountForEmbeddingInPipelineSplit = true
		}, "p0: E0+1; p1: 1+2; p2: 3+2; p3: 5+2L"},
		{"account for loss", func(c *TransformerConfig) {
			*c = pipelined(7, 4, 0)
			c.AccountForLossInPipelineSplit = true
		}, "p0: E0+2; p1: 2+2; p2: 4+2; p3: 6+1L"},
		{"account for embedding and loss", func(c *TransformerConfig) {
			*c = pipelined(6, 4, 0)
			c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
		}, "p0: E0+1; p1: 1+2; p2: 3+2; p3: 5+1L"},
		{"account for embedding and loss, vpp 2", func(c *TransformerConfig) {
			*c = pipelined(14, 4, 2)
			c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
		}, "p0: E0+1 | 7+2; p1: 1+2 | 9+2; p2: 3+2 | 11+2; p3: 5+2 | 13+1L"},
		{"account for embedding, one decoder per chunk", func(c *TransformerConfig) {
			*c = pipelined(3, 2, 0)
			c.AccountForEmbeddingInPipelineSplit = true
		}, "p0: E0+1; p1: 1+2L"},
		{"account for embedding, num_layers_per_virtual_pipeline_stage", func(c *TransformerConfig) {
			*c = pipelined(7, 4, 0)
			c.AccountForEmbeddingInPipelineSplit, c.NumLayersPerVirtualPipelineStage = true, 1
		}, "p0: E0+0 | 3+1; p1: 0+1 | 4+1; p2: 1+1 | 5+1; p3: 2+1 | 6+1L"},
		{"layout E||t|L, pp 4", func(c *TransformerConfig) {
			*c = pipelined(1, 4, 0)
			c.PipelineModelParallelLayout = "E||t|L"
		}, "p0: E0+0; p1: 0+0; p2: 0+1; p3: 1+0L"},
		{"layout E||t|L, pp 2 (vpp 2 from the layout)", func(c *TransformerConfig) {
			*c = pipelined(1, 2, 0)
			c.PipelineModelParallelLayout = "E||t|L"
		}, "p0: E0+0 | 0+1; p1: 0+0 | 1+0L"},
		{"layout with mtp", func(c *TransformerConfig) {
			*c = pipelined(8, 4, 2)
			c.PipelineModelParallelLayout, c.MTPNumLayers = "E|t*3|(t|)*4tm|L", 1
		}, "p0: E0+0 | 5+1; p1: 0+3 | 6+1; p2: 3+1 | 7+1m; p3: 4+1 | 8+0L"},
		{"layout, loss and embedding on one chunk", func(c *TransformerConfig) {
			*c = pipelined(2, 1, 0)
			c.PipelineModelParallelLayout = "EttL"
		}, "p0: E0+2L"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validTransformer()
			tc.change(&c)
			chunks, err := c.PipelineChunks()
			if err != nil {
				t.Fatal(err)
			}
			if got := chunkGrid(chunks); got != tc.want {
				t.Errorf("chunks\n got %s\nwant %s", got, tc.want)
			}
			checkChunksConsistent(t, c, chunks)
		})
	}
}

// checkChunksConsistent asserts what every placement must satisfy: in layer
// order (v-major, then p) the chunks' decoder layers are consecutive and
// cover 0 … num_layers−1; the embedding is on exactly one chunk before every
// decoder layer and the loss on exactly one after; and the layout of the
// chunks (LayoutOfChunks), given back as pipeline_model_parallel_layout,
// places every layer the same way.
func checkChunksConsistent(t *testing.T, c TransformerConfig, chunks [][]PipelineChunk) {
	t.Helper()
	P := len(chunks)
	V := len(chunks[0])
	next, pre, post, mtp := 0, 0, 0, 0
	for v := 0; v < V; v++ {
		for p := 0; p < P; p++ {
			ch := chunks[p][v]
			if ch.NumLayers < 0 || ch.LayerOffset != next {
				t.Fatalf("chunk (p %d, v %d) = %+v: want offset %d and a count ≥ 0", p, v, ch, next)
			}
			if ch.PreProcess {
				pre++
				if next != 0 {
					t.Errorf("embedding on chunk (p %d, v %d) after %d decoder layers", p, v, next)
				}
			}
			next += ch.NumLayers
			if ch.PostProcess {
				post++
				if next != c.NumLayers {
					t.Errorf("loss on chunk (p %d, v %d) before decoder layer %d", p, v, next)
				}
			}
			mtp += ch.MTPLayers
		}
	}
	if next != c.NumLayers || pre != 1 || post != 1 || mtp != c.MTPNumLayers {
		t.Errorf("%d decoder layers, %d embeddings, %d losses, %d mtp layers", next, pre, post, mtp)
	}
	l := LayoutOfChunks(chunks)
	if err := l.Validate(c.NumLayers, c.MTPNumLayers); err != nil {
		t.Errorf("layout of the chunks %q: %v", l, err)
	}
	for v := 0; v < V; v++ {
		for p := 0; p < P; p++ {
			if o := l.LayerOffset(LayerDecoder, v, p); o != chunks[p][v].LayerOffset {
				t.Errorf("layout offset (p %d, v %d) %d, chunk %d", p, v, o, chunks[p][v].LayerOffset)
			}
		}
	}
	d := c
	d.PipelineModelParallelLayout = l.String()
	d.NumLayersInFirstPipelineStage, d.NumLayersInLastPipelineStage = 0, 0
	d.AccountForEmbeddingInPipelineSplit, d.AccountForLossInPipelineSplit = false, false
	d.NumLayersPerVirtualPipelineStage = 0
	d.VirtualPipelineModelParallelSize = c.ResolvePipelineLayout().VirtualPipelineModelParallelSize
	again, err := d.PipelineChunks()
	if err != nil {
		t.Fatalf("layout %q: %v", l, err)
	}
	if chunkGrid(again) != chunkGrid(chunks) {
		t.Errorf("layout %q places\n%s\nnot\n%s", l, chunkGrid(again), chunkGrid(chunks))
	}
}

// TestPipelineChunksSweep runs every small configuration of every way of
// splitting and checks that whatever PipelineChunks accepts is a consistent
// placement, and that Validate's pipeline rules accept exactly the same
// configurations.
func TestPipelineChunksSweep(t *testing.T) {
	accepted := 0
	for pp := 1; pp <= 5; pp++ {
		for vpp := 0; vpp <= 3; vpp++ {
			for n := 1; n <= 13; n++ {
				for mode := 0; mode < 9; mode++ {
					c := pipelined(n, pp, vpp)
					switch mode {
					case 1:
						c.AccountForEmbeddingInPipelineSplit = true
					case 2:
						c.AccountForLossInPipelineSplit = true
					case 3:
						c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
					case 4:
						c.NumLayersInFirstPipelineStage = 2
					case 5:
						c.NumLayersInLastPipelineStage = 2
					case 6:
						c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 2, 4
					case 7:
						c.NumLayersInFirstPipelineStage = 1
					case 8:
						c.NumLayersPerVirtualPipelineStage = 2
					}
					chunks, err := c.PipelineChunks()
					var vs violationList
					c.ResolvePipelineLayout().pipelineViolations(&vs)
					// PipelineChunks also refuses vpp with pp = 1, which
					// Validate reports from the ModelParallelConfig.
					if (err == nil) != (len(vs) == 0) && !(c.ResolvePipelineLayout().Interleaved() && pp == 1) {
						t.Errorf("pp %d vpp %d n %d mode %d: PipelineChunks error %v, Validate's pipeline rules %v", pp, vpp, n, mode, err, NewValidationError(vs))
					}
					if err != nil {
						continue
					}
					accepted++
					if len(chunks) != pp || len(chunks[0]) != c.ResolvePipelineLayout().NumModelChunks() {
						t.Fatalf("pp %d vpp %d n %d mode %d: %d×%d chunks", pp, vpp, n, mode, len(chunks), len(chunks[0]))
					}
					checkChunksConsistent(t, c, chunks)
				}
			}
		}
	}
	if accepted < 200 {
		t.Errorf("only %d configurations accepted", accepted)
	}
}

func TestPipelineChunksErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*TransformerConfig)
		want   string
	}{
		{"no layers", func(c *TransformerConfig) { c.NumLayers = 0 }, "num_layers is 0"},
		{"pp 0", func(c *TransformerConfig) { c.PipelineModelParallelSize = 0 }, "pipeline_model_parallel_size = 0"},
		{"negative vpp", func(c *TransformerConfig) { c.VirtualPipelineModelParallelSize = -1 }, "virtual_pipeline_model_parallel_size = -1"},
		{"vpp without pp", func(c *TransformerConfig) { c.VirtualPipelineModelParallelSize = 2 }, "needs pipeline_model_parallel_size > 1"},
		{"indivisible", func(c *TransformerConfig) { *c = pipelined(6, 4, 0) }, "num_layers 6 is not divisible by pipeline_model_parallel_size 4"},
		{"bad layout", func(c *TransformerConfig) { c.PipelineModelParallelLayout = "Et*3|x" }, "invalid layer character 'x'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pipelined(4, 1, 0)
			tc.change(&c)
			_, err := c.PipelineChunks()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			asValidationError(t, err)
		})
	}
}

func TestLayoutOfChunks(t *testing.T) {
	c := pipelined(6, 4, 0)
	c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
	chunks, err := c.PipelineChunks()
	if err != nil {
		t.Fatal(err)
	}
	l := LayoutOfChunks(chunks)
	if l.String() != "Et|tt|tt|tL" || l.Source() != l.String() || l.PP() != 4 || l.VPP() != 1 {
		t.Errorf("layout %q (source %q), pp %d vpp %d", l, l.Source(), l.PP(), l.VPP())
	}
	// Positions point into the expanded string.
	err = l.Validate(7, 0)
	if err == nil || !strings.Contains(err.Error(), "num_layers is 7") {
		t.Errorf("Validate(7, 0) = %v", err)
	}
	l = LayoutOfChunks([][]PipelineChunk{{{PreProcess: true, NumLayers: 1}}, {{NumLayers: 1, MTPLayers: 1, PostProcess: true}}})
	if l.String() != "Et|tmL" || l.Validate(2, 1) != nil {
		t.Errorf("layout %q", l)
	}
}

// TestMTPChunks: where the final layernorm, the word-embedding copies and
// the standalone MTP stage fall, for the seed's DeepSeek-V3 layout and
// the reference documentation's three MTP layouts, tied and untied.
func TestMTPChunks(t *testing.T) {
	for _, c := range []struct {
		layout              string
		layers, pp          int
		tied                bool
		norm                [2]int // the (p, v) of the final layernorm
		stages              []int  // WordEmbeddingStages
		standalone, afterPV bool   // MTPStandalone; the loss chunk is after the depths
	}{
		{"Et*3|(tt|)*29,m|L", 61, 16, true, [2]int{13, 1}, []int{0, 14, 15}, true, true},
		{"Et*3|(tt|)*29,m|L", 61, 16, false, [2]int{13, 1}, []int{0, 14}, true, true},
		{"E|t*3|(t|)*5mL", 8, 4, true, [2]int{2, 1}, []int{0, 3}, false, false},
		{"E|t*3|(t|)*4tm|L", 8, 4, false, [2]int{2, 1}, []int{0, 2}, true, true},
		{"E|t*3|(t|)*3tt|m|L", 8, 4, true, [2]int{1, 1}, []int{0, 2, 3}, true, true},
	} {
		cfg := pipelined(c.layers, c.pp, 0)
		cfg.PipelineModelParallelLayout, cfg.MTPNumLayers, cfg.PositionEmbeddingType = c.layout, 1, RoPE
		cfg.ShareEmbeddingsAndOutputWeights = c.tied
		chunks, err := cfg.PipelineChunks()
		if err != nil {
			t.Fatalf("%s: %v", c.layout, err)
		}
		for p, row := range chunks {
			for v, ch := range row {
				if want := [2]int{p, v} == c.norm; ch.FinalNorm != want {
					t.Errorf("%s: chunk (%d, %d) FinalNorm %v, want %v", c.layout, p, v, ch.FinalNorm, want)
				}
				if ch.PostProcess && ch.AfterMTP != c.afterPV {
					t.Errorf("%s: the loss chunk's AfterMTP is %v, want %v", c.layout, ch.AfterMTP, c.afterPV)
				}
			}
		}
		if got := cfg.WordEmbeddingStages(); !slices.Equal(got, c.stages) {
			t.Errorf("%s tied=%v: WordEmbeddingStages %v, want %v", c.layout, c.tied, got, c.stages)
		}
		if got := cfg.MTPStandalone(); got != c.standalone {
			t.Errorf("%s: MTPStandalone %v, want %v", c.layout, got, c.standalone)
		}
	}
	plain := pipelined(8, 2, 0)
	if plain.WordEmbeddingStages() != nil || plain.MTPStandalone() || !plain.HoldsFinalNorm(true, 4, 0) || plain.HoldsFinalNorm(false, 4, 4) {
		t.Error("without MTP: the loss chunk holds the final norm, and the embedding group is the mesh's")
	}
}
