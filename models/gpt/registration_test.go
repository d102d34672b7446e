package gpt

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor/rng"
)

// TestRegisteredParametersMatchSpecs builds chunks and checks that
// ChunkParamSpecs names and shapes exactly what RegisteredParameters
// returns, that every parameter is listed once, and that a layer lists
// linear_proj before linear_qkv (the reference's registration order).
func TestRegisteredParametersMatchSpecs(t *testing.T) {
	for _, preset := range presetNames {
		t.Run("preset="+preset, func(t *testing.T) { testRegistered(t, preset) })
	}
	if _, err := ChunkParamSpecs(chunkTestConfig(), 3, ChunkSpec{NumLayers: 1}); err == nil {
		t.Error("4 heads over 3 tensor-parallel ranks: no error")
	}
}

func testRegistered(t *testing.T, preset string) {
	for _, pp := range []int{1, 2} {
		cfg := presetConfig(preset)
		if pp > 1 {
			cfg.PipelineModelParallelSize, cfg.NumLayers, cfg.PipelineDType = pp, 6, config.Float32
		}
		for _, spec := range []ChunkSpec{
			{PreProcess: true, PostProcess: true, NumLayers: 5},
			{PreProcess: true, NumLayers: 2},
			{LayerOffset: 2, NumLayers: 1},
			{LayerOffset: 3, NumLayers: 2, PostProcess: true},
		} {
			spec.MTP = spec.PostProcess && cfg.MTPNumLayers > 0
			c, err := NewChunk(cfg, rng.New(7), nil, spec)
			if err != nil {
				t.Fatal(err)
			}
			specs, err := ChunkParamSpecs(cfg, 1, spec)
			if err != nil {
				t.Fatal(err)
			}
			got := c.RegisteredParameters()
			if len(got) != len(specs) || len(got) != len(c.Parameters()) {
				t.Fatalf("pp %d %+v: %d registered parameters, %d specs, %d parameters", pp, spec, len(got), len(specs), len(c.Parameters()))
			}
			seen := map[string]bool{}
			for i, p := range got {
				s := specs[i]
				if p.Name != s.Name || !slices.Equal(p.Value.Shape(), s.Shape) || p.Value.Len() != s.Numel() {
					t.Errorf("pp %d %+v: parameter %d is %s %v, spec %s %v", pp, spec, i, p.Name, p.Value.Shape(), s.Name, s.Shape)
				}
				if s.SharedEmbedding != (pp > 1 && p == c.WordEmbeddings && cfg.ShareEmbeddingsAndOutputWeights) {
					t.Errorf("pp %d %+v: %s SharedEmbedding = %v", pp, spec, s.Name, s.SharedEmbedding)
				}
				seen[p.Name] = true
			}
			if len(seen) != len(got) {
				t.Errorf("pp %d %+v: a parameter is listed twice", pp, spec)
			}
			if spec.NumLayers > 0 {
				l := spec.LayerOffset
				at := func(name string) int {
					return slices.IndexFunc(specs, func(s ParamSpec) bool { return s.Name == fmt.Sprintf("decoder.layers.%d.self_attention.%s", l, name) })
				}
				if proj, qkv := at("linear_proj.weight"), at("linear_qkv.weight"); proj < 0 || qkv < proj {
					t.Errorf("pp %d %+v: linear_qkv.weight (%d) does not follow linear_proj (%d)", pp, spec, qkv, proj)
				}
			}
		}
	}
}
