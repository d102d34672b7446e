package gpt

import (
	"context"
	"testing"
	"time"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor/rng"
)

// TestPartition: on two tensor-parallel ranks the column-parallel QKV
// weight is cut along dim 0 (its stride 1), the row-parallel projection
// along dim 1, the vocabulary-parallel embedding along dim 0, and a layer
// norm is replicated (Dim −1) with the rank's place in the group.
func TestPartition(t *testing.T) {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = 1, 16, 2, 8, 32
	cfg.MaxPositionEmbeddings, cfg.TensorModelParallelSize = 8, 2
	want := func(rank int) map[string]ckpt.Partition {
		return map[string]ckpt.Partition{
			"decoder.layers.0.self_attention.linear_qkv.weight":  {Dim: 0, Stride: 1, Size: 2, Rank: rank},
			"decoder.layers.0.self_attention.linear_proj.weight": {Dim: 1, Stride: 1, Size: 2, Rank: rank},
			"embedding.word_embeddings.weight":                   {Dim: 0, Stride: 1, Size: 2, Rank: rank},
			"decoder.final_layernorm.weight":                     {Dim: -1, Rank: rank},
		}
	}
	err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, err := NewParallel(cfg, rng.New(1), g)
		if err != nil {
			return err
		}
		seen := 0
		for _, p := range m.Parameters() {
			w, ok := want(g.Rank())[p.Name]
			if !ok {
				continue
			}
			seen++
			if got := m.Partition(p); got != w {
				t.Errorf("rank %d: %s: %+v, want %+v", g.Rank(), p.Name, got, w)
			}
		}
		if seen != 4 {
			t.Errorf("rank %d: %d of the 4 parameters found", g.Rank(), seen)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
