package hf

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzImportConfig feeds config.json documents to Import with a fixture's
// weights: any document gives a config and weights or an error, never a
// panic, and an accepted one builds (Import validates it).
func FuzzImportConfig(f *testing.F) {
	var weights []*Model
	for _, name := range fixtures {
		m, err := Read(fixture(name))
		if err != nil {
			f.Fatal(err)
		}
		weights = append(weights, m)
		raw, err := os.ReadFile(filepath.Join(fixture(name), ConfigFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"model_type": "gpt2", "vocab_size": 100, "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 16, "n_inner": 1e30}`))
	f.Add([]byte(`{"model_type": "llama", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 3, "num_key_value_heads": 0}`))
	f.Add([]byte(`{"model_type": "llama", "rope_theta": -1, "rms_norm_eps": "x", "tie_word_embeddings": 1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var cfg map[string]any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if d.Decode(&cfg) != nil {
			return
		}
		for _, w := range weights {
			c, ts, err := Import(&Model{Config: cfg, Tensors: w.Tensors})
			if err != nil {
				continue
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Import accepted a config that does not validate: %v", err)
			}
			if _, err := Export(c, ts); err != nil {
				t.Fatalf("Import's result does not export back: %v", err)
			}
		}
	})
}
