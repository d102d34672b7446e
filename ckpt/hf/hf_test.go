package hf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor/rng"
)

// fixtures are tools/torchref/hf_ref.py's: a random model of each family
// as Hugging Face stores it, and the logits of its published forward pass.
var fixtures = []string{"hf_gpt2", "hf_llama"}

func fixture(name string) string { return filepath.Join("..", "..", "testdata", name) }

// logitsOf runs cfg's gotron model with the whole weights ts on the ids
// [b, s] and returns the logits [s, b, V].
func logitsOf(t *testing.T, cfg config.TransformerConfig, ts []safetensors.Tensor, ids []int32, b, s int) []float32 {
	t.Helper()
	cfg.MaxPositionEmbeddings = cfg.MaxPositions()                   // (it may follow the sequence length)
	cfg.SeqLength, cfg.HiddenDropout, cfg.AttentionDropout = s, 0, 0 // evaluation
	m, err := gpt.New(cfg, rng.New(1))
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.SortedFunc(slices.Values(ts), func(a, b safetensors.Tensor) int { return strings.Compare(a.Name, b.Name) })
	if err := m.LoadTensors(&safetensors.File{Name: "converted", Tensors: sorted}, "converted"); err != nil {
		t.Fatal(err)
	}
	out, err := m.ForwardInputs(autograd.NewTape(context.Background()), gpt.Inputs{IDs: ids, Rows: b, Seq: s}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out.Value.Contiguous().Data()
}

// TestImportMatchesPyTorch: each fixture, imported (--from-hf), gives in
// gotron the logits the independent PyTorch forward of its family gives,
// to 1e-5 of the largest; exported again (--to-hf) it is the fixture's
// model.safetensors bit for bit, and its config.json holds the fixture's
// settings.
func TestImportMatchesPyTorch(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			dir := fixture(name)
			m, err := Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg, ts, err := Import(m)
			if err != nil {
				t.Fatal(err)
			}
			checkLogits(t, dir, cfg, ts)
			back, err := Export(cfg, ts)
			if err != nil {
				t.Fatal(err)
			}
			checkSameTensors(t, back.Tensors, m.Tensors)
			checkConfigKeeps(t, back.Config, m.Config)
		})
	}
}

// checkLogits fails unless gotron's logits of cfg with the whole weights
// ts, on the token ids of dir/logits.safetensors, are that file's logits
// (the PyTorch forward's, [b, s, V]) to 1e-5 of the largest.
func checkLogits(t *testing.T, dir string, cfg config.TransformerConfig, ts []safetensors.Tensor) {
	t.Helper()
	ref, err := safetensors.ReadFile(filepath.Join(dir, "logits.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	want, idsF := mustF32(t, ref, "logits"), mustF32(t, ref, "input_ids")
	lt, _ := ref.Get("logits")
	b, s, v := lt.Shape[0], lt.Shape[1], lt.Shape[2]
	ids := make([]int32, len(idsF))
	for i, x := range idsF {
		ids[i] = int32(x)
	}
	got := logitsOf(t, cfg, ts, ids, b, s) // [s, b, V]
	var worst, scale float64
	for r := range b {
		for i := range s {
			for k := range v {
				w := float64(want[(r*s+i)*v+k])
				worst = max(worst, math.Abs(float64(got[(i*b+r)*v+k])-w))
				scale = max(scale, math.Abs(w))
			}
		}
	}
	t.Logf("logits: largest difference %.2g, %.2g of the largest logit", worst, worst/scale)
	if worst > 1e-5*scale {
		t.Errorf("gotron's logits and the PyTorch forward's differ by %.2g (%.2g relative), want ≤ 1e-5", worst, worst/scale)
	}
}

func mustF32(t *testing.T, f *safetensors.File, name string) []float32 {
	t.Helper()
	x, ok := f.Get(name)
	if !ok {
		t.Fatalf("%s has no %s", f.Name, name)
	}
	d, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkSameTensors fails unless got and want hold the same names, shapes
// and bytes.
func checkSameTensors(t *testing.T, got, want []safetensors.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	byName := map[string]safetensors.Tensor{}
	for _, x := range want {
		byName[x.Name] = x
	}
	for _, x := range got {
		w, ok := byName[x.Name]
		switch {
		case !ok:
			t.Errorf("tensor %s is not in the original", x.Name)
		case fmt.Sprint(x.Shape) != fmt.Sprint(w.Shape) || !bytes.Equal(x.Data, w.Data):
			t.Errorf("tensor %s: shape %v, original %v; same bytes %v", x.Name, x.Shape, w.Shape, bytes.Equal(x.Data, w.Data))
		}
	}
}

// checkConfigKeeps fails unless every setting of want that concerns the
// model has got's value (compared as JSON text).
func checkConfigKeeps(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if strings.HasSuffix(k, "token_id") {
			continue // the tokenizer's, not the model's
		}
		g, ok := got[k]
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if !ok || !jsonEqual(gj, wj) {
			t.Errorf("config.json %s: %s after the round trip, %s before", k, gj, wj)
		}
	}
}

// jsonEqual compares two JSON values, numbers by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// TestInterleavedRotaryExport: a gotron Llama that rotates adjacent pairs
// (--rotary-interleaved), exported, is a Hugging Face Llama (halves) that
// gives the same logits: its query and key rows were permuted within each
// head. Without the permutation the logits differ.
func TestInterleavedRotaryExport(t *testing.T) {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.NumQueryGroups, c.FFNHiddenSize, c.VocabSize = 2, 32, 4, 2, 48, 50
	c.Normalization, c.ActivationFunc, c.GatedLinearUnit, c.PositionEmbeddingType = config.RMSNormType, config.SiLU, true, config.RoPE
	c.AddBiasLinear, c.ShareEmbeddingsAndOutputWeights, c.RotaryInterleaved, c.SeqLength = false, false, true, 8
	c.InitMethodStd = 0.2
	m, err := gpt.New(c, rng.New(3))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := m.WeightTensors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{1, 5, 9, 2, 49, 0, 7, 7, 3, 11, 12, 13, 14, 15, 16, 17}
	want := logitsOf(t, c, ts, ids, 2, 8)
	hfm, err := Export(c, ts)
	if err != nil {
		t.Fatal(err)
	}
	back, halves, err := Import(hfm)
	if err != nil {
		t.Fatal(err)
	}
	if back.RotaryInterleaved {
		t.Fatal("the imported Llama rotates pairs")
	}
	got := logitsOf(t, back, halves, ids, 2, 8)
	diff := maxDiff(got, want)
	if diff > 1e-5 {
		t.Errorf("the exported model's logits differ from the interleaved model's by %.2g", diff)
	}
	plain := back
	plain.RotaryInterleaved = true
	if maxDiff(logitsOf(t, plain, halves, ids, 2, 8), want) < 1e-3 {
		t.Error("the permutation changes nothing: the test cannot fail")
	}
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestExportRefusals: a model neither family expresses is refused with
// every reason at once.
func TestExportRefusals(t *testing.T) {
	c := config.DefaultTransformerConfig()
	c.NumMoEExperts, c.QKLayernorm, c.GatedLinearUnit = 4, true, true
	_, err := FamilyOf(c)
	for _, want := range []string{"GPT-2", "MoE layers", "normalises queries and keys", "not gated"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("MoE + qk-layernorm + gated GELU: %v, want it to name %q", err, want)
		}
	}
	c = config.DefaultTransformerConfig()
	c.HiddenSize, c.NumAttentionHeads = 32, 4
	c.Normalization, c.PositionEmbeddingType, c.RotaryPercent = config.RMSNormType, config.RoPE, 0.5
	_, err = FamilyOf(c)
	for _, want := range []string{"Llama", "SwiGLU", "no biases", "whole heads"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RMSNorm + partial RoPE + GELU: %v, want it to name %q", err, want)
		}
	}
}

// TestImportRefusals: config.json values gotron cannot build, and weights
// missing or left over, are errors naming them.
func TestImportRefusals(t *testing.T) {
	base, err := Read(fixture("hf_llama"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(m *Model)
		want string
	}{
		{"rope scaling", func(m *Model) { m.Config["rope_scaling"] = map[string]any{"rope_type": "llama3"} }, "rope_scaling"},
		{"rope parameters with scaling (transformers 5)", func(m *Model) {
			m.Config["rope_parameters"] = map[string]any{"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}
		}, "rope_parameters"},
		{"rope parameters without their base", func(m *Model) { m.Config["rope_parameters"] = map[string]any{"rope_type": "default"} }, "lacks"},
		{"two rotary bases", func(m *Model) {
			m.Config["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 500000.0}
		}, "disagree"},
		{"a scaling without its type", func(m *Model) { m.Config["rope_scaling"] = map[string]any{"factor": 8.0} }, "rope_scaling"},
		{"a null count", func(m *Model) { m.Config["vocab_size"] = nil }, "config.json: vocab_size is missing"},
		{"activation", func(m *Model) { m.Config["hidden_act"] = "gelu" }, "hidden_act"},
		{"fractional theta", func(m *Model) { m.Config["rope_theta"] = 10000.5 }, "rope_theta"},
		{"no vocabulary", func(m *Model) { delete(m.Config, "vocab_size") }, "vocab_size is missing"},
		{"family", func(m *Model) { m.Config["model_type"] = "mistral" }, `"mistral"`},
		{"a missing weight", func(m *Model) { m.Tensors = m.Tensors[1:] }, "has no tensor"},
		{"a weight too many", func(m *Model) {
			m.Tensors = append(m.Tensors, safetensors.F32("model.layers.0.self_attn.q_norm.weight", []int{8}, make([]float32, 8)))
		}, "q_norm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Model{Config: map[string]any{}, Tensors: append([]safetensors.Tensor(nil), base.Tensors...)}
			for k, v := range base.Config {
				m.Config[k] = v
			}
			c.edit(m)
			if _, _, err := Import(m); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "not a count") {
				t.Errorf("got %v, want an error naming %q (once)", err, c.want)
			}
		})
	}
}

// TestImportRopeParameters: transformers 5 keeps the rotary base in
// rope_parameters (rope_type default) and writes no rope_theta; a
// rope_scaling of type default is no scaling. Both import, with the base.
func TestImportRopeParameters(t *testing.T) {
	base, err := Read(fixture("hf_llama"))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(c map[string]any){
		"rope_parameters": func(c map[string]any) {
			delete(c, "rope_theta")
			c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 500000.0}
		},
		"rope_scaling default": func(c map[string]any) {
			c["rope_theta"], c["rope_scaling"] = 500000.0, map[string]any{"rope_type": "default"}
		},
	} {
		c := map[string]any{}
		for k, v := range base.Config {
			c[k] = v
		}
		edit(c)
		cfg, _, err := Import(&Model{Config: c, Tensors: base.Tensors})
		if err != nil || cfg.RotaryBase != 500000 {
			t.Errorf("%s: rotary base %d, %v; want 500000", name, cfg.RotaryBase, err)
		}
	}
}

// TestWriteRead: Write then Read gives the model back.
func TestWriteRead(t *testing.T) {
	m, err := Read(fixture("hf_gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSameTensors(t, back.Tensors, m.Tensors)
	checkConfigKeeps(t, back.Config, m.Config)
	if err := os.Remove(filepath.Join(dir, WeightsFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), WeightsFile) {
		t.Errorf("a directory without weights: %v, want an error naming %s", err, WeightsFile)
	}
}

// exportCases are the gotron models TestExportMatchesPyTorch exports:
// a GPT-2 shape (untied, the erf GELU, no biases: zeros go out) and a
// Llama shape (grouped queries, tied, rotary base 500000), seeded.
var exportCases = map[string]func() config.TransformerConfig{
	"hf_export_gpt2": func() config.TransformerConfig {
		c := config.DefaultTransformerConfig()
		c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.FFNHiddenSize, c.VocabSize, c.SeqLength = 2, 32, 4, 80, 100, 16
		c.ShareEmbeddingsAndOutputWeights, c.AddBiasLinear, c.BiasActivationFusion = false, false, false
		return c
	},
	"hf_export_llama": func() config.TransformerConfig {
		c := config.DefaultTransformerConfig()
		c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.NumQueryGroups, c.FFNHiddenSize, c.VocabSize, c.SeqLength = 2, 32, 4, 1, 48, 100, 16
		c.Normalization, c.ActivationFunc, c.GatedLinearUnit, c.PositionEmbeddingType = config.RMSNormType, config.SiLU, true, config.RoPE
		c.AddBiasLinear, c.RotaryBase = false, 500000
		return c
	},
}

// TestExportMatchesPyTorch: a seeded gotron model of each family,
// exported (--to-hf), is the committed Hugging Face files bit for bit, and
// the independent PyTorch forward of those files (tools/torchref/hf_ref.py
// --logits) gives gotron's logits of the original model to 1e-5 of the
// largest. GOTRON_UPDATE_HF_EXPORT=1 rewrites the files (then run
// hf_ref.py --logits on them).
func TestExportMatchesPyTorch(t *testing.T) {
	for name, mk := range exportCases {
		t.Run(name, func(t *testing.T) {
			c := mk()
			c.InitMethodStd = 0.2
			m, err := gpt.New(c, rng.New(11))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := m.WeightTensors(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out, err := Export(c, ts)
			if err != nil {
				t.Fatal(err)
			}
			dir := fixture(name)
			if os.Getenv("GOTRON_UPDATE_HF_EXPORT") != "" {
				if err := out.Write(dir); err != nil {
					t.Fatal(err)
				}
				t.Skipf("wrote %s: now run tools/torchref/hf_ref.py --logits %s", dir, dir)
			}
			committed, err := Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			checkSameTensors(t, out.Tensors, committed.Tensors)
			checkConfigKeeps(t, out.Config, committed.Config)
			checkLogits(t, dir, c, ts)
		})
	}
}
