//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/train"
)

// TestMoEFlagsParse: each MoE flag lands in the config under Megatron's
// defaults; --moe-layer-freq takes an integer or a list pattern.
func TestMoEFlagsParse(t *testing.T) {
	def := train.DefaultArgs().Model
	if !reflect.DeepEqual(def.MoE, config.DefaultMoE()) || def.NumMoEExperts != 0 || def.MoERouterTopK != 2 || def.MoERouterScoreFunction != "softmax" ||
		def.MoERouterLoadBalancingType != "aux_loss" || def.MoEAuxLossCoeff != 0 || def.MoETokenDispatcherType != "allgather" ||
		def.MoETokenDropPolicy != "probs" || def.MoERouterBiasUpdateRate != 1e-3 || def.ExpertTensorParallelSize != 0 {
		t.Errorf("defaults %+v (etp %d), want Megatron's", def.MoE, def.ExpertTensorParallelSize)
	}
	for _, c := range []struct {
		args string
		want func(m *config.TransformerConfig)
	}{
		{"--num-experts 8", func(m *config.TransformerConfig) { m.NumMoEExperts = 8 }},
		{"--num-experts 8 --moe-layer-freq 2", func(m *config.TransformerConfig) { m.NumMoEExperts, m.MoELayerFreq = 8, []int{2} }},
		{"--num-experts 8 --moe-layer-freq 1", func(m *config.TransformerConfig) { m.NumMoEExperts, m.MoELayerFreq = 8, []int{1} }},
		{"--num-experts 8 --num-layers 8 --moe-layer-freq ([1]*3+[0]*1)*2", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.NumLayers, m.MoELayerFreq = 8, 8, []int{1, 1, 1, 0, 1, 1, 1, 0}
		}},
		{"--num-experts 8 --num-layers 3 --moe-layer-freq [1,0,1]", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.NumLayers, m.MoELayerFreq = 8, 3, []int{1, 0, 1}
		}},
		{"--num-experts 8 --num-layers 1 --moe-layer-freq [1]", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.NumLayers, m.MoELayerFreq = 8, 1, []int{1}
		}},
		{"--num-experts 8 --moe-ffn-hidden-size 96 --moe-shared-expert-intermediate-size 64", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoEFFNHiddenSize, m.MoESharedExpertIntermediateSize = 8, 96, 64
		}},
		{"--num-experts 8 --moe-router-topk 1 --moe-router-pre-softmax", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoERouterTopK, m.MoERouterPreSoftmax = 8, 1, true
		}},
		{"--num-experts 8 --moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-2", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoERouterScoreFunction, m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = 8, "sigmoid", true, 1e-2
		}},
		{"--num-experts 8 --moe-router-num-groups 4 --moe-router-group-topk 2 --moe-router-topk-scaling-factor 2.5", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoERouterNumGroups, m.MoERouterGroupTopK, m.MoERouterTopKScalingFactor = 8, 4, 2, 2.5
		}},
		{"--num-experts 8 --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoERouterLoadBalancingType, m.MoEAuxLossCoeff, m.MoEZLossCoeff = 8, "seq_aux_loss", 1e-2, 1e-3
		}},
		{"--num-experts 8 --moe-expert-capacity-factor 1.5 --moe-token-drop-policy position --moe-pad-expert-input-to-capacity", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoEExpertCapacityFactor, m.MoETokenDropPolicy, m.MoEPadExpertInputToCapacity = 8, 1.5, "position", true
		}},
		{"--num-experts 8 --moe-token-dispatcher-type alltoall --moe-grouped-gemm", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoETokenDispatcherType, m.MoEGroupedGEMM = 8, "alltoall", true
		}},
	} {
		got, err := parseModelFlags(strings.Fields(c.args)...)
		if err != nil {
			t.Errorf("%s: %v", c.args, err)
			continue
		}
		want := def
		c.want(&want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.args, got.MoE, want.MoE)
		}
	}

	// Each expert's width defaults to the FFN's (SwiGLU's default too).
	m, err := parseModelFlags("--num-experts", "4", "--swiglu", "--hidden-size", "4096")
	if err != nil || m.MoEFFN() != 10880 {
		t.Errorf("--num-experts 4 --swiglu --hidden-size 4096: expert width %d (%v), want 10880", m.MoEFFN(), err)
	}
}

// TestMoEFlagErrors gives `gotron train` MoE settings that cannot work:
// each is refused before any rank starts (nothing on stdout), with
// status 1 and "gotron: invalid arguments: …" on stderr, one line naming
// the flag and the fix.
func TestMoEFlagErrors(t *testing.T) {
	moe := []string{"--num-experts", "4"}
	with := func(extra ...string) []string { return append(slices.Clone(moe), extra...) }
	for _, c := range []struct {
		name  string
		extra []string
		want  []string
		lines bool // other refusals of the same settings may be listed too
	}{
		{"experts not divisible by EP", []string{"--world-size", "2", "--num-experts", "3", "--expert-model-parallel-size", "2"},
			[]string{"num_moe_experts 3 is not divisible by expert_model_parallel_size 2", "choose --num-experts a multiple of 2"}, true},
		{"top-k beyond the experts", with("--moe-router-topk", "5"),
			[]string{"moe_router_topk 5 with num_moe_experts 4", "set --moe-router-topk"}, false},
		{"groups not dividing the experts", with("--moe-router-num-groups", "3", "--moe-router-group-topk", "1"),
			[]string{"num_moe_experts 4 in moe_router_num_groups 3", "choose --moe-router-num-groups a divisor of --num-experts"}, false},
		{"EP × ETP not dividing the world", with("--world-size", "2", "--expert-tensor-parallel-size", "4"),
			[]string{"world_size 2 is not divisible by expert_tensor_parallel_size·expert_model_parallel_size·pipeline_model_parallel_size = 4·1·1 = 4",
				"--expert-tensor-parallel-size, --expert-model-parallel-size"}, false},
		{"MoE with TP and without SP", with("--world-size", "2", "--tensor-model-parallel-size", "2"),
			[]string{"MoE and tensor parallelism need sequence parallelism", "add --sequence-parallel"}, false},
		{"expert TP of a dense model", []string{"--world-size", "2", "--expert-tensor-parallel-size", "2"},
			[]string{"expert_tensor_parallel_size 2 splits experts", "set --num-experts or drop --expert-tensor-parallel-size"}, false},
		{"negative experts", []string{"--num-experts", "-1"}, []string{"num_moe_experts is -1", "--num-experts"}, false},
		{"negative expert width", with("--moe-ffn-hidden-size", "-8"), []string{"moe_ffn_hidden_size is -8", "--moe-ffn-hidden-size"}, false},
		{"negative shared width", with("--moe-shared-expert-intermediate-size", "-8"),
			[]string{"moe_shared_expert_intermediate_size is -8", "--moe-shared-expert-intermediate-size"}, false},
		{"negative groups", with("--moe-router-num-groups", "-2", "--moe-router-group-topk", "1"),
			[]string{"must not be negative", "--moe-router-num-groups"}, false},
		{"NaN aux coefficient", with("--moe-aux-loss-coeff", "NaN"), []string{"moe_aux_loss_coeff is NaN", "--moe-aux-loss-coeff"}, false},
		{"negative z coefficient", with("--moe-z-loss-coeff", "-1"), []string{"moe_z_loss_coeff is -1", "--moe-z-loss-coeff"}, false},
		{"infinite scaling factor", with("--moe-router-topk-scaling-factor", "inf"),
			[]string{"moe_router_topk_scaling_factor is +Inf", "--moe-router-topk-scaling-factor"}, false},
		{"NaN capacity", with("--moe-expert-capacity-factor", "NaN"), []string{"moe_expert_capacity_factor is NaN", "--moe-expert-capacity-factor"}, false},
		{"NaN bias rate", with("--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "NaN"),
			[]string{"moe_router_bias_update_rate is NaN", "--moe-router-bias-update-rate"}, false},
		{"expert bias with softmax", with("--moe-router-enable-expert-bias"), []string{"--moe-router-score-function sigmoid"}, false},
		{"top-1 softmax after the top-k", with("--moe-router-topk", "1"), []string{"add --moe-router-pre-softmax"}, false},
		{"unknown score function", with("--moe-router-score-function", "relu"), []string{`"relu" is not known`, "--moe-router-score-function"}, false},
		{"unknown balancing", with("--moe-router-load-balancing-type", "sinkhorn"),
			[]string{`"sinkhorn" is not provided by gotron`, "--moe-router-load-balancing-type"}, false},
		{"unknown drop policy", with("--moe-expert-capacity-factor", "1", "--moe-token-drop-policy", "random"),
			[]string{`"random" is not known`, "--moe-token-drop-policy"}, false},
		{"unknown dispatcher", with("--moe-token-dispatcher-type", "flex"), []string{`"flex" is not provided by gotron`, "--moe-token-dispatcher-type"}, false},
		{"padding without capacity", with("--moe-pad-expert-input-to-capacity"), []string{"set --moe-expert-capacity-factor"}, false},
		{"layer frequency 0", with("--moe-layer-freq", "0"), []string{"moe_layer_freq 0", "N ≥ 1", "--moe-layer-freq"}, false},
		{"negative layer frequency", with("--moe-layer-freq", "-2"), []string{"moe_layer_freq -2", "--moe-layer-freq"}, false},
		{"layer frequency not a number", with("--moe-layer-freq", "half"), []string{`moe_layer_freq "half" is neither an integer`, "set --moe-layer-freq to N"}, false},
		{"pattern of another length", with("--moe-layer-freq", "[1,0,1]"), []string{"moe_layer_freq lists 3 values", "num_layers 2", "--moe-layer-freq"}, false},
		{"pattern of one value", with("--moe-layer-freq", "[1]"), []string{"--moe-layer-freq [1] lists 1 value", "--moe-layer-freq 1"}, false},
		{"pattern value 2", with("--moe-layer-freq", "[1,2]"), []string{"moe_layer_freq marks layer 1 with 2", "--moe-layer-freq"}, false},
		{"pattern syntax", with("--moe-layer-freq", "([1]*2"), []string{`moe_layer_freq pattern "([1]*2": at offset 6: '(' is not closed`, "set --moe-layer-freq"}, false},
		{"pattern of lists times lists", with("--moe-layer-freq", "[1]*[2]"), []string{"'*' between two lists"}, false},
		{"MoE flag without experts", []string{"--moe-router-topk", "4"},
			[]string{"--moe-router-topk shapes MoE layers, and --num-experts is unset", "add --num-experts, or drop --moe-router-topk"}, false},
		{"bias rate without the bias", with("--moe-router-bias-update-rate", "1e-2"),
			[]string{"--moe-router-bias-update-rate takes effect only with --moe-router-enable-expert-bias"}, false},
		{"drop policy without capacity", with("--moe-token-drop-policy", "position"),
			[]string{"--moe-token-drop-policy chooses", "--moe-expert-capacity-factor is unset"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runMain(t, append(append(slices.Clone(cpModel), "--seq-length", "16", "--disable-bias-linear"), c.extra...)...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("refused after ranks started: stdout\n%s", stdout)
			}
			msg := strings.TrimSuffix(stderr, "\n")
			if !strings.HasPrefix(msg, "gotron: invalid arguments") || !c.lines && (!strings.HasPrefix(msg, "gotron: invalid arguments: ") || strings.Contains(msg, "\n")) {
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

// TestMoEFlagsInspect: gotron inspect buckets lays out the experts
// --num-experts, --moe-layer-freq and the widths ask for, and inspect
// buckets and memory refuse what train refuses.
func TestMoEFlagsInspect(t *testing.T) {
	args := []string{"inspect", "buckets", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
		"--vocab-size", "64", "--disable-bias-linear", "--json", "--num-experts", "4", "--moe-layer-freq", "[0,1]",
		"--moe-ffn-hidden-size", "48", "--moe-shared-expert-intermediate-size", "16"}
	out, err := run(t, args...)
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
	for name, want := range map[string]int{
		"decoder.layers.0.mlp.linear_fc1.weight":                         128 * 32,
		"decoder.layers.1.mlp.router.weight":                             4 * 32,
		"decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight": 48 * 32,
		"decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight": 32 * 48,
		"decoder.layers.1.mlp.shared_experts.linear_fc1.weight":          16 * 32,
	} {
		if n[name] != want {
			t.Errorf("%s: %d elements, want %d", name, n[name], want)
		}
	}
	if _, ok := n["decoder.layers.1.mlp.linear_fc1.weight"]; ok {
		t.Errorf("the MoE layer 1 has a dense linear_fc1")
	}

	for _, cmd := range [][]string{{"inspect", "buckets"}, {"inspect", "memory"}} {
		_, err := run(t, append(cmd, "--moe-router-topk", "4")...)
		if err == nil || !strings.Contains(err.Error(), "invalid arguments: --moe-router-topk shapes MoE layers") {
			t.Errorf("%s --moe-router-topk 4: %v", strings.Join(cmd, " "), err)
		}
	}
}

// TestMoEFlagsHelp: every MoE flag is in gotron train's, inspect memory's
// and inspect buckets' help, the expert-parallel sizes in train's and
// inspect buckets'.
func TestMoEFlagsHelp(t *testing.T) {
	for _, args := range [][]string{{"train"}, {"inspect", "memory"}, {"inspect", "buckets"}} {
		out, err := run(t, append(args, "--help")...)
		if err != nil {
			t.Fatal(err)
		}
		flags := append([]string{"num-experts"}, moeFlagNames...)
		if args[0] == "train" || args[1] == "buckets" {
			flags = append(flags, "expert-model-parallel-size", "expert-tensor-parallel-size")
		}
		for _, f := range flags {
			if !strings.Contains(out, fmt.Sprintf("--%s ", f)) {
				t.Errorf("%s --help lacks --%s", strings.Join(args, " "), f)
			}
		}
		if strings.Contains(out, "not built yet") {
			t.Errorf("%s --help says something is not built yet:\n%s", strings.Join(args, " "), out)
		}
	}
}
