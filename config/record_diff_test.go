package config

import (
	"reflect"
	"testing"
)

// TestOptionDiffs: two models differ by the options that change what they
// build, each named by its flag; spellings that build the same model do
// not differ.
func TestOptionDiffs(t *testing.T) {
	base := DefaultTransformerConfig()
	base.NumLayers, base.HiddenSize, base.NumAttentionHeads = 4, 64, 4
	for _, c := range []struct {
		name string
		set  func(*TransformerConfig)
		want []string
	}{
		{"same", func(*TransformerConfig) {}, nil},
		{"query groups spelled as the heads", func(m *TransformerConfig) { m.NumQueryGroups = 4 }, nil},
		{"norm", func(m *TransformerConfig) { m.Normalization = RMSNormType },
			[]string{"--normalization LayerNorm in the checkpoint, RMSNorm in this run"}},
		{"swiglu", func(m *TransformerConfig) { m.ActivationFunc, m.GatedLinearUnit = SiLU, true },
			[]string{"--swiglu in this run, not in the checkpoint"}},
		{"groups and untied", func(m *TransformerConfig) { m.NumQueryGroups, m.ShareEmbeddingsAndOutputWeights = 2, false },
			[]string{"--num-query-groups 4 in the checkpoint, 2 in this run", "--untie-embeddings-and-output-weights in this run, not in the checkpoint"}},
		{"experts", func(m *TransformerConfig) { m.NumMoEExperts = 8 },
			[]string{"--num-experts unset in the checkpoint, 8 in this run"}},
	} {
		now := base
		c.set(&now)
		if got := base.OptionDiffs(now); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
