//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/train"
)

// parseModelFlags parses args (Megatron's spelling) with the model flags
// of gotron train into train's default model and applies them.
func parseModelFlags(args ...string) (config.TransformerConfig, error) {
	m := train.DefaultArgs().Model
	f := pflag.NewFlagSet("train", pflag.ContinueOnError)
	mf := addModelFlags(f, &m)
	if err := f.Parse(megatronArgs(args)); err != nil {
		return m, err
	}
	return m, mf.apply()
}

// TestModelFlagsParse: each model-option flag lands in the config as
// Megatron's training layer derives it from its arguments.
func TestModelFlagsParse(t *testing.T) {
	def := train.DefaultArgs().Model
	for _, c := range []struct {
		args string
		want func(m *config.TransformerConfig)
	}{
		{"", func(m *config.TransformerConfig) {}},
		{"--normalization RMSNorm --norm-epsilon 1e-6 --apply-layernorm-1p --qk-layernorm", func(m *config.TransformerConfig) {
			m.Normalization, m.LayernormEpsilon, m.LayernormZeroCenteredGamma, m.QKLayernorm = config.RMSNormType, 1e-6, true, true
		}},
		{"--layernorm-epsilon 1e-6", func(m *config.TransformerConfig) { m.LayernormEpsilon = 1e-6 }},
		{"--swiglu", func(m *config.TransformerConfig) { m.ActivationFunc, m.GatedLinearUnit = config.SiLU, true }},
		{"--swiglu --no-bias-swiglu-fusion", func(m *config.TransformerConfig) {
			m.ActivationFunc, m.GatedLinearUnit, m.BiasActivationFusion = config.SiLU, true, false
		}},
		// The SwiGLU fusion is not the GELU fusion: neither the GELU flag
		// nor dropping the biases turns it off.
		{"--swiglu --no-bias-gelu-fusion --disable-bias-linear", func(m *config.TransformerConfig) {
			m.ActivationFunc, m.GatedLinearUnit, m.AddBiasLinear = config.SiLU, true, false
		}},
		{"--no-bias-swiglu-fusion", func(m *config.TransformerConfig) {}},
		{"--no-bias-gelu-fusion", func(m *config.TransformerConfig) { m.BiasActivationFusion = false }},
		{"--disable-bias-linear", func(m *config.TransformerConfig) { m.AddBiasLinear, m.BiasActivationFusion = false, false }},
		{"--disable-bias-linear --add-qkv-bias", func(m *config.TransformerConfig) {
			m.AddBiasLinear, m.BiasActivationFusion, m.AddQKVBias = false, false, true
		}},
		{"--squared-relu", func(m *config.TransformerConfig) { m.ActivationFunc = config.SquaredReLU }},
		{"--openai-gelu", func(m *config.TransformerConfig) { m.ActivationFunc = config.OpenAIGELU }},
		{"--group-query-attention", func(m *config.TransformerConfig) { m.NumQueryGroups = 1 }},
		{"--num-query-groups 2 --group-query-attention", func(m *config.TransformerConfig) { m.NumQueryGroups = 2 }},
		{"--kv-channels 32", func(m *config.TransformerConfig) { m.KVChannels = 32 }},
		{"--position-embedding-type rope --rotary-base 500000 --rotary-percent 0.5 --rotary-interleaved", func(m *config.TransformerConfig) {
			m.PositionEmbeddingType, m.RotaryBase, m.RotaryPercent, m.RotaryInterleaved = config.RoPE, 500000, 0.5, true
		}},
		{"--position-embedding-type none", func(m *config.TransformerConfig) { m.PositionEmbeddingType = config.NoPositions }},
		{"--use-rotary-position-embeddings", func(m *config.TransformerConfig) { m.PositionEmbeddingType = config.RoPE }},
		{"--use-rotary-position-embeddings --position-embedding-type rope --no-position-embedding", func(m *config.TransformerConfig) {
			m.PositionEmbeddingType = config.RoPE
		}},
		{"--no-position-embedding --use-rotary-position-embeddings", func(m *config.TransformerConfig) { m.PositionEmbeddingType = config.RoPE }},
		{"--untie-embeddings-and-output-weights", func(m *config.TransformerConfig) { m.ShareEmbeddingsAndOutputWeights = false }},
		{"--apply-residual-connection-post-layernorm", func(m *config.TransformerConfig) { m.ApplyResidualConnectionPostLayernorm = true }},
	} {
		got, err := parseModelFlags(strings.Fields(c.args)...)
		if err != nil {
			t.Errorf("%s: %v", c.args, err)
			continue
		}
		want := def
		c.want(&want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.args, got, want)
		}
	}

	// --swiglu without --ffn-hidden-size: 4·h·2/3 rounded down to a
	// multiple of 64.
	m, err := parseModelFlags("--swiglu", "--hidden-size", "4096")
	if err != nil || m.FFN() != 10880 || m.FC1Width() != 2*10880 {
		t.Errorf("--swiglu --hidden-size 4096: FFN %d, FC1 %d (%v), want 10880, 21760", m.FFN(), m.FC1Width(), err)
	}
}

// TestModelFlagErrors gives `gotron train` model options that cannot work:
// each is refused before any rank starts (nothing on stdout), with status
// 1 and one line on stderr, "gotron: invalid arguments: …", naming the
// flag and the fix.
func TestModelFlagErrors(t *testing.T) {
	rope := []string{"--position-embedding-type", "rope"}
	for _, c := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"heads not divisible by groups",
			[]string{"--group-query-attention", "--num-query-groups", "3"},
			[]string{"num_attention_heads 4 is not divisible by num_query_groups 3", "--num-query-groups a divisor of 4"}},
		{"groups not divisible by TP",
			[]string{"--world-size", "2", "--tensor-model-parallel-size", "2", "--group-query-attention"},
			[]string{"num_query_groups 1 is not divisible by tensor_model_parallel_size 2", "--num-query-groups a multiple of 2"}},
		{"rotary percent 0", append(slices.Clone(rope), "--rotary-percent", "0"),
			[]string{"rotary_percent is 0", "(0, 1]", "--rotary-percent"}},
		{"rotary percent 1.5", append(slices.Clone(rope), "--rotary-percent", "1.5"),
			[]string{"rotary_percent is 1.5", "(0, 1]", "--rotary-percent"}},
		{"rotary percent NaN", append(slices.Clone(rope), "--rotary-percent", "NaN"),
			[]string{"rotary_percent is NaN", "(0, 1]", "--rotary-percent"}},
		{"rotary percent -1", append(slices.Clone(rope), "--rotary-percent", "-1"),
			[]string{"rotary_percent is -1", "(0, 1]", "--rotary-percent"}},
		{"rotary percent rotating an odd channel count", append(slices.Clone(rope), "--rotary-percent", "0.375"),
			[]string{"rotary_percent 0.375 of head dimension 8", "rotates 3 channels", "--rotary-percent"}},
		{"rotary base 0", append(slices.Clone(rope), "--rotary-base", "0"),
			[]string{"rotary_base is 0", "--rotary-base"}},
		{"SwiGLU FFN not divisible by TP",
			[]string{"--world-size", "2", "--tensor-model-parallel-size", "2", "--swiglu", "--ffn-hidden-size", "65"},
			[]string{"ffn_hidden_size 65 is not divisible by tensor_model_parallel_size 2", "--swiglu", "--ffn-hidden-size a multiple of 2"}},
		{"SwiGLU's default FFN of a narrow model",
			[]string{"--swiglu", "--hidden-size", "16"},
			[]string{"SwiGLU's default for hidden_size 16 is 0", "set --ffn-hidden-size"}},
		{"--num-query-groups without --group-query-attention",
			[]string{"--num-query-groups", "2"},
			[]string{"--num-query-groups 2 takes effect only with --group-query-attention", "add --group-query-attention, or drop --num-query-groups"}},
		{"--num-query-groups 0", []string{"--group-query-attention", "--num-query-groups", "0"},
			[]string{"--num-query-groups 0", "at least 1"}},
		{"--swiglu with --squared-relu",
			[]string{"--swiglu", "--squared-relu"},
			[]string{"--swiglu and --squared-relu each choose the MLP's activation: give one"}},
		{"--openai-gelu with --swiglu",
			[]string{"--openai-gelu", "--swiglu", "--ffn-hidden-size", "64"},
			[]string{"--swiglu and --openai-gelu each choose the MLP's activation: give one"}},
		{"--no-position-embedding",
			[]string{"--no-position-embedding"},
			[]string{"--no-position-embedding", "accepted only with rope", "use --position-embedding-type none"}},
		{"--no-position-embedding with none",
			[]string{"--no-position-embedding", "--position-embedding-type", "none"},
			[]string{"--no-position-embedding", "use --position-embedding-type none"}},
		{"--use-rotary-position-embeddings with another type",
			[]string{"--use-rotary-position-embeddings", "--position-embedding-type", "learned_absolute"},
			[]string{"--use-rotary-position-embeddings and --position-embedding-type learned_absolute", "give one"}},
		{"RoPE flag without RoPE",
			[]string{"--rotary-base", "500000"},
			[]string{"--rotary-base shapes rotary position embeddings", "learned_absolute", "add --position-embedding-type rope, or drop --rotary-base"}},
		{"both spellings of ε",
			[]string{"--norm-epsilon", "1e-6", "--layernorm-epsilon", "1e-6"},
			[]string{"--norm-epsilon and --layernorm-epsilon set the same ε: give one"}},
		{"unknown --normalization",
			[]string{"--normalization", "rmsnorm"},
			[]string{`normalization "rmsnorm" is not known`, "--normalization LayerNorm or RMSNorm"}},
		{"unknown --position-embedding-type",
			[]string{"--position-embedding-type", "alibi"},
			[]string{`position_embedding_type "alibi" is not known`, "--position-embedding-type learned_absolute, rope or none"}},
		{"negative --kv-channels",
			[]string{"--kv-channels", "-8"},
			[]string{"kv_channels is -8", "--kv-channels"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runMain(t, append(append(slices.Clone(cpModel), "--seq-length", "16"), c.extra...)...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("refused after ranks started: stdout\n%s", stdout)
			}
			msg := strings.TrimSuffix(stderr, "\n")
			if !strings.HasPrefix(msg, "gotron: invalid arguments: ") || strings.Contains(msg, "\n") {
				t.Errorf("stderr is not one line \"gotron: invalid arguments: …\":\n%s", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestModelFlagErrorsListed: several flag errors are listed at once.
func TestModelFlagErrorsListed(t *testing.T) {
	_, err := parseModelFlags("--swiglu", "--squared-relu", "--num-query-groups", "2", "--no-position-embedding")
	if err == nil || !strings.HasPrefix(err.Error(), "invalid arguments (3):\n  - ") {
		t.Fatalf("got %v, want three errors listed", err)
	}
}

// TestModelFlagsInspect: gotron inspect buckets and inspect memory read
// the model options too (linear_qkv's width with grouped-query attention,
// the untied output layer, SwiGLU's doubled linear_fc1), and refuse what
// gotron train refuses.
func TestModelFlagsInspect(t *testing.T) {
	model := []string{"inspect", "buckets", "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
		"--vocab-size", "64", "--json"}
	sizes := func(extra ...string) map[string]int {
		t.Helper()
		out, err := run(t, append(slices.Clone(model), extra...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var doc bucketsJSON
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		n := map[string]int{}
		for _, b := range doc.Buffers {
			for _, k := range b.Buckets {
				for _, p := range k.Params {
					n[p.Name] = p.End - p.Start
				}
			}
		}
		return n
	}
	const qkv, fc1, out = "decoder.layers.0.self_attention.linear_qkv.weight", "decoder.layers.0.mlp.linear_fc1.weight", "output_layer.weight"
	plain := sizes()
	opts := sizes("--group-query-attention", "--num-query-groups", "2", "--swiglu", "--ffn-hidden-size", "48", "--untie-embeddings-and-output-weights")
	if plain[qkv] != 3*32*32 || opts[qkv] != (4+2*2)*8*32 {
		t.Errorf("linear_qkv: %d elements, with 2 query groups %d; want %d, %d", plain[qkv], opts[qkv], 3*32*32, (4+2*2)*8*32)
	}
	if plain[fc1] != 4*32*32 || opts[fc1] != 2*48*32 {
		t.Errorf("linear_fc1: %d elements, with --swiglu --ffn-hidden-size 48 %d; want %d, %d", plain[fc1], opts[fc1], 4*32*32, 2*48*32)
	}
	if _, ok := plain[out]; ok {
		t.Errorf("a tied model has %s", out)
	}
	if _, ok := opts[out]; !ok {
		t.Errorf("--untie-embeddings-and-output-weights: no %s among %v", out, opts)
	}

	for _, cmd := range [][]string{{"inspect", "buckets"}, {"inspect", "memory"}} {
		_, err := run(t, append(cmd, "--swiglu", "--squared-relu")...)
		if err == nil || !strings.Contains(err.Error(), "invalid arguments: --swiglu and --squared-relu") {
			t.Errorf("%s --swiglu --squared-relu: %v", strings.Join(cmd, " "), err)
		}
	}
}

// TestModelFlagsHelp: every model-option flag is in gotron train's, inspect
// memory's and inspect buckets' help.
func TestModelFlagsHelp(t *testing.T) {
	flags := []string{"normalization", "norm-epsilon", "layernorm-epsilon", "apply-layernorm-1p", "qk-layernorm", "swiglu", "squared-relu",
		"openai-gelu", "no-bias-gelu-fusion", "no-bias-swiglu-fusion", "disable-bias-linear", "add-qkv-bias", "group-query-attention",
		"num-query-groups", "kv-channels", "position-embedding-type", "rotary-base", "rotary-percent", "rotary-interleaved",
		"use-rotary-position-embeddings", "no-position-embedding", "untie-embeddings-and-output-weights",
		"apply-residual-connection-post-layernorm", "init-method-std", "ffn-hidden-size"}
	for _, args := range [][]string{{"train"}, {"inspect", "memory"}, {"inspect", "buckets"}} {
		out, err := run(t, append(args, "--help")...)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flags {
			if !strings.Contains(out, fmt.Sprintf("--%s ", f)) {
				t.Errorf("%s --help lacks --%s", strings.Join(args, " "), f)
			}
		}
	}
}
