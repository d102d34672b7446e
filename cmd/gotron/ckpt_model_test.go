//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/train"
)

// llamaFlags give cpModel (2 layers, width 32, 4 heads of 8) the
// Llama-class options.
var llamaFlags = []string{"--normalization", "RMSNorm", "--swiglu", "--ffn-hidden-size", "64", "--group-query-attention",
	"--num-query-groups", "2", "--position-embedding-type", "rope", "--rotary-percent", "0.5", "--disable-bias-linear",
	"--untie-embeddings-and-output-weights"}

// trainMain runs gotron train (cpModel, sequence 16, extra flags) in a
// child process, expecting success; it returns the losses --log-json
// recorded.
func trainMain(t *testing.T, extra ...string) []float64 {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log.jsonl")
	args := append(append(slices.Clone(cpModel), "--seq-length", "16", "--log-json", logPath), extra...)
	stdout, stderr, code := runMain(t, args...)
	if code != 0 {
		t.Fatalf("gotron %s: status %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var losses []float64
	for s := bufio.NewScanner(f); s.Scan(); {
		var r train.Record
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, r.Loss)
	}
	return losses
}

// inspectModelLine returns what `gotron ckpt inspect` prints on its
// "model" line for dir.
func inspectModelLine(t *testing.T, dir string) string {
	t.Helper()
	out, err := run(t, "ckpt", "inspect", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "model" {
			return strings.Join(f[1:], " ")
		}
	}
	t.Fatalf("no model line:\n%s", out)
	return ""
}

// refusedResume resumes from dir with extra flags, expecting the
// checkpoint's differences to be refused before any rank starts: status
// 1, nothing on stdout, one line naming each difference.
func refusedResume(t *testing.T, dir string, extra []string, want ...string) {
	t.Helper()
	args := append(append(slices.Clone(cpModel), "--seq-length", "16", "--load", dir, "--train-iters", "3"), extra...)
	stdout, stderr, code := runMain(t, args...)
	if code != 1 || stdout != "" {
		t.Errorf("%v: status %d, stdout\n%s", extra, code, stdout)
	}
	msg := strings.TrimSuffix(stderr, "\n")
	if !strings.HasPrefix(msg, "gotron: --load "+dir+" (iteration 2): the checkpoint's settings differ from this run's: ") || strings.Contains(msg, "\n") {
		t.Errorf("%v: stderr is not one line naming the checkpoint:\n%s", extra, stderr)
	}
	for _, w := range append(want, "pass the checkpoint's values (--use-checkpoint-args takes the model's shape and options from the checkpoint)") {
		if !strings.Contains(msg, w) {
			t.Errorf("%v: error lacks %q:\n%s", extra, w, msg)
		}
	}
}

// TestCkptModelOptionsDefault: a GPT-2-shaped run records only the norm
// epsilon (every record lists it, so that a checkpoint older than the
// record, saved with any --layernorm-epsilon, is told apart); resuming it
// with other options is refused, each difference named with its flag;
// other spellings of the same model resume.
func TestCkptModelOptionsDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	trainMain(t, "--save", dir)
	if m := openManifest(t, dir).Args; !reflect.DeepEqual(m.Model, map[string]string{"layernorm_epsilon": "1e-05"}) || m.Ints["hidden_size"] != 32 {
		t.Errorf("args %+v, want the model options {layernorm_epsilon: 1e-05}", m)
	}
	if got := inspectModelLine(t, dir); !strings.HasPrefix(got, "defaults (LayerNorm, GELU, biases,") {
		t.Errorf("ckpt inspect shows the model options as %q, want the defaults", got)
	}

	refusedResume(t, dir, []string{"--normalization", "RMSNorm"}, "--normalization LayerNorm in the checkpoint, RMSNorm in this run")
	refusedResume(t, dir, []string{"--swiglu", "--ffn-hidden-size", "128", "--group-query-attention", "--num-query-groups", "2",
		"--position-embedding-type", "rope", "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--qk-layernorm",
		"--apply-layernorm-1p", "--norm-epsilon", "1e-6", "--kv-channels", "16", "--apply-residual-connection-post-layernorm"},
		"--swiglu in this run, not in the checkpoint", "--num-query-groups 4 in the checkpoint, 2 in this run",
		"--position-embedding-type learned_absolute in the checkpoint, rope in this run",
		"--disable-bias-linear in this run, not in the checkpoint", "--untie-embeddings-and-output-weights in this run, not in the checkpoint",
		"--qk-layernorm in this run, not in the checkpoint", "--apply-layernorm-1p in this run, not in the checkpoint",
		"--norm-epsilon 1e-05 in the checkpoint, 1e-06 in this run", "--kv-channels 8 in the checkpoint, 16 in this run",
		"--apply-residual-connection-post-layernorm in this run, not in the checkpoint")
	// GELU's erf form instead of the fused tanh form; a shape and an
	// option differ at once.
	refusedResume(t, dir, []string{"--no-bias-gelu-fusion", "--hidden-size", "64"},
		"--no-bias-gelu-fusion in this run, not in the checkpoint", "--hidden-size 32 in the checkpoint, 64 in this run")
	refusedResume(t, dir, []string{"--openai-gelu"}, "--openai-gelu in this run, not in the checkpoint")

	// The same model spelled otherwise: as many query groups as heads,
	// the unfused SwiGLU of a GELU model, the default norm named.
	if l := trainMain(t, "--load", dir, "--train-iters", "3", "--group-query-attention", "--num-query-groups", "4",
		"--no-bias-swiglu-fusion", "--normalization", "LayerNorm", "--layernorm-epsilon", "1e-5"); len(l) != 1 {
		t.Errorf("resumed %d iterations, want 1", len(l))
	}
}

// TestCkptModelOptionsLlama: a Llama-class run records its options;
// `gotron ckpt inspect` shows them; resuming without them is refused
// naming each; --use-checkpoint-args takes them (the resumed losses are
// those of resuming with the flags); the whole-tensor form keeps them.
func TestCkptModelOptionsLlama(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	trainMain(t, append(slices.Clone(llamaFlags), "--save", dir)...)
	// Not bias_activation_fusion: on, as by default (SwiGLU's fusion).
	want := map[string]string{"normalization": "RMSNorm", "activation_func": "silu", "gated_linear_unit": "true", "layernorm_epsilon": "1e-05",
		"add_bias_linear": "false", "num_query_groups": "2", "position_embedding_type": "rope",
		"rotary_percent": "0.5", "share_embeddings_and_output_weights": "false"}
	m := openManifest(t, dir)
	if !reflect.DeepEqual(m.Args.Model, want) || m.Args.Ints["ffn_hidden_size"] != 64 {
		t.Errorf("recorded %v (ffn %d), want %v (ffn 64)", m.Args.Model, m.Args.Ints["ffn_hidden_size"], want)
	}

	if got, want := inspectModelLine(t, dir), "activation_func=silu add_bias_linear=false gated_linear_unit=true normalization=RMSNorm "+
		"num_query_groups=2 position_embedding_type=rope rotary_percent=0.5 share_embeddings_and_output_weights=false"; got != want {
		t.Errorf("ckpt inspect shows the model options as %q, want %q", got, want)
	}

	refusedResume(t, dir, nil, "--normalization RMSNorm in the checkpoint, LayerNorm in this run",
		"--swiglu in the checkpoint, not in this run", "--ffn-hidden-size 64 in the checkpoint, 128 in this run",
		"--disable-bias-linear in the checkpoint, not in this run", "--num-query-groups 2 in the checkpoint, 4 in this run",
		"--position-embedding-type rope in the checkpoint, learned_absolute in this run",
		"--untie-embeddings-and-output-weights in the checkpoint, not in this run")
	refusedResume(t, dir, append(slices.Clone(llamaFlags), "--rotary-percent", "1", "--rotary-interleaved", "--rotary-base", "500000"),
		"--rotary-percent 0.5 in the checkpoint, 1 in this run", "--rotary-interleaved in this run, not in the checkpoint",
		"--rotary-base 10000 in the checkpoint, 500000 in this run")

	withFlags := trainMain(t, append(slices.Clone(llamaFlags), "--load", dir, "--train-iters", "3")...)
	fromCkpt := trainMain(t, "--load", dir, "--train-iters", "3", "--use-checkpoint-args")
	if len(withFlags) != 1 || !slices.Equal(fromCkpt, withFlags) {
		t.Errorf("--use-checkpoint-args: losses %v, with the flags %v", fromCkpt, withFlags)
	}

	whole, back := filepath.Join(t.TempDir(), "whole"), filepath.Join(t.TempDir(), "back")
	if out, err := run(t, "ckpt", "convert", "--to-whole", dir, whole); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := run(t, "ckpt", "convert", "--from-whole", whole, back); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := openManifest(t, back).Args; !reflect.DeepEqual(got, m.Args) {
		t.Errorf("after the whole-tensor form: args %+v, want %+v", got, m.Args)
	}
}

// rewriteManifest edits the manifest of dir's iteration it, writing it
// back under its correct checksum (as a gotron that records more, or a
// hand, would have written it).
func rewriteManifest(t *testing.T, dir string, it int, edit func(*ckpt.Manifest)) {
	t.Helper()
	m := openManifest(t, dir)
	edit(m)
	body, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	file := fmt.Appendf(nil, "{\"crc32c\": \"%08x\", \"manifest\": %s}\n", crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)), body)
	if err := os.WriteFile(filepath.Join(ckpt.IterDir(dir, it), ckpt.ManifestFile), file, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCkptModelOptionsUnreadable: a model option this gotron does not
// know, or a value not of its kind, is refused by a resume and by
// --use-checkpoint-args, naming it.
func TestCkptModelOptionsUnreadable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	trainMain(t, "--save", dir)
	for _, c := range []struct {
		model map[string]string
		want  string
	}{
		{map[string]string{"attention_output_gate": "true", "normalization": "RMSNorm"},
			"the checkpoint records model options this gotron does not know (attention_output_gate): load it with the gotron that saved it"},
		{map[string]string{"rotary_percent": "half"}, `the checkpoint's manifest is damaged: the model option rotary_percent is recorded as "half", which is not a value of it`},
	} {
		d := copyDir(t, dir)
		rewriteManifest(t, d, 2, func(m *ckpt.Manifest) { m.Args.Model = c.model })
		for _, extra := range [][]string{nil, {"--use-checkpoint-args"}} {
			args := append(append(slices.Clone(cpModel), "--seq-length", "16", "--load", d, "--train-iters", "3"), extra...)
			stdout, stderr, code := runMain(t, args...)
			if code != 1 || stdout != "" || !strings.Contains(stderr, "--load "+d+" (iteration 2): "+c.want) {
				t.Errorf("%v %v: status %d, stdout %q, stderr\n%s", c.model, extra, code, stdout, stderr)
			}
		}
	}
}

// moeModelFlags give cpModel 4 experts in its first layer, with options that
// change the numbers.
var moeModelFlags = []string{"--disable-bias-linear", "--num-experts", "4", "--moe-layer-freq", "[1,0]", "--moe-ffn-hidden-size", "48",
	"--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3", "--moe-expert-capacity-factor", "1.5", "--moe-token-drop-policy", "position"}

// TestCkptModelOptionsMoE: a MoE run records its MoE options (not the
// dispatcher); `gotron ckpt inspect` shows them; resuming without them,
// or with others, is refused naming each flag; the same model spelled
// otherwise, or with another dispatcher, resumes; --use-checkpoint-args
// takes them (the resumed losses are those of resuming with the flags).
func TestCkptModelOptionsMoE(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	trainMain(t, append(slices.Clone(moeModelFlags), "--save", dir)...)
	want := map[string]string{"layernorm_epsilon": "1e-05", "add_bias_linear": "false", "bias_activation_fusion": "false",
		"num_moe_experts": "4", "moe_layer_freq": "[1,0]", "moe_ffn_hidden_size": "48", "moe_aux_loss_coeff": "0.01",
		"moe_z_loss_coeff": "0.001", "moe_expert_capacity_factor": "1.5", "moe_token_drop_policy": "position"}
	if m := openManifest(t, dir).Args; !reflect.DeepEqual(m.Model, want) {
		t.Errorf("recorded %v, want %v", m.Model, want)
	}
	if got, want := inspectModelLine(t, dir), "add_bias_linear=false bias_activation_fusion=false moe_aux_loss_coeff=0.01 "+
		"moe_expert_capacity_factor=1.5 moe_ffn_hidden_size=48 moe_layer_freq=[1,0] moe_token_drop_policy=position "+
		"moe_z_loss_coeff=0.001 num_moe_experts=4"; got != want {
		t.Errorf("ckpt inspect shows the model options as %q, want %q", got, want)
	}

	refusedResume(t, dir, []string{"--disable-bias-linear"}, "--num-experts 4 in the checkpoint, unset in this run")
	refusedResume(t, dir, []string{"--disable-bias-linear", "--num-experts", "4", "--moe-router-topk", "1", "--moe-router-pre-softmax",
		"--moe-layer-freq", "1", "--moe-router-load-balancing-type", "none", "--moe-expert-capacity-factor", "1.5"},
		"--moe-layer-freq [1,0] in the checkpoint, 1 in this run", "--moe-ffn-hidden-size 48 in the checkpoint, 128 in this run",
		"--moe-router-topk 2 in the checkpoint, 1 in this run", "--moe-router-pre-softmax in this run, not in the checkpoint",
		"--moe-router-load-balancing-type aux_loss in the checkpoint, none in this run",
		"--moe-aux-loss-coeff 0.01 in the checkpoint, 0 in this run", "--moe-z-loss-coeff 0.001 in the checkpoint, 0 in this run",
		"--moe-token-drop-policy position in the checkpoint, probs in this run")

	withFlags := trainMain(t, append(slices.Clone(moeModelFlags), "--load", dir, "--train-iters", "3")...)
	otherwise := trainMain(t, append(slices.Clone(moeModelFlags), "--load", dir, "--train-iters", "3", "--moe-layer-freq", "2",
		"--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm")...)
	fromCkpt := trainMain(t, "--load", dir, "--train-iters", "3", "--use-checkpoint-args")
	if len(withFlags) != 1 || !slices.Equal(fromCkpt, withFlags) || !slices.Equal(otherwise, withFlags) {
		t.Errorf("--use-checkpoint-args: losses %v; spelled otherwise %v; with the flags %v", fromCkpt, otherwise, withFlags)
	}
}
