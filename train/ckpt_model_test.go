package train

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/config"
)

// TestOldCheckpointKeepsEpsilon: a checkpoint older than the model record
// (no "model" in its args) was saved with any --layernorm-epsilon, so its
// epsilon is not compared and --use-checkpoint-args keeps the run's; a
// new record always lists the epsilon, and a record of an invalid model
// is refused as damaged.
func TestOldCheckpointKeepsEpsilon(t *testing.T) {
	a := tpArgs(1, 1)
	a.Model.LayernormEpsilon = 1e-3
	old := ckpt.Args{Ints: argsRecord(a, 1).Ints}
	if err := compareArgs(a, old, false); err != nil {
		t.Errorf("an old checkpoint with this run's shape: %v", err)
	}
	m := a.Model
	if err := applyModelRecord(&m, old.Model); err != nil || m.LayernormEpsilon != 1e-3 {
		t.Errorf("--use-checkpoint-args on an old checkpoint: epsilon %g (%v), want the run's 0.001", m.LayernormEpsilon, err)
	}
	rec := argsRecord(a, 1)
	if rec.Model["layernorm_epsilon"] != "0.001" {
		t.Errorf("the record lists layernorm_epsilon as %q, want 0.001", rec.Model["layernorm_epsilon"])
	}
	b := a
	b.Model.LayernormEpsilon = 1e-5
	if err := compareArgs(b, rec, false); err == nil || !strings.Contains(err.Error(), "--norm-epsilon 0.001 in the checkpoint, 1e-05 in this run") {
		t.Errorf("a new checkpoint with another epsilon: %v", err)
	}
	m = config.DefaultTransformerConfig()
	if err := applyModelRecord(&m, map[string]string{"kv_channels": "-5"}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a record of kv_channels -5: %v, want a damaged-manifest error", err)
	}
}

// moeRecordArgs is tpArgs(1, 1) with 4 experts in every other layer and most
// of the MoE options away from their defaults.
func moeRecordArgs() Args {
	a := tpArgs(1, 1)
	m := &a.Model
	m.AddBiasLinear, m.BiasActivationFusion = false, false
	m.NumMoEExperts, m.MoELayerFreq, m.MoEFFNHiddenSize, m.MoESharedExpertIntermediateSize = 4, []int{2}, 48, 16
	m.MoERouterTopK, m.MoERouterScoreFunction, m.MoERouterNumGroups, m.MoERouterGroupTopK = 2, "sigmoid", 2, 1
	m.MoERouterTopKScalingFactor, m.MoERouterLoadBalancingType, m.MoEAuxLossCoeff, m.MoEZLossCoeff = 2.5, "seq_aux_loss", 1e-2, 1e-3
	m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = true, 1e-2
	m.MoEExpertCapacityFactor, m.MoETokenDropPolicy, m.MoEPadExpertInputToCapacity = 1.5, "position", true
	m.MoETokenDispatcherType, m.MoEGroupedGEMM = "alltoall", true
	return a
}

// TestMoERecord: a MoE model records every option that changes its
// numbers (not the dispatcher nor the grouped GEMM), by
// TransformerConfig's JSON names; --use-checkpoint-args takes them back;
// a dense model records none, whatever its MoE fields hold.
func TestMoERecord(t *testing.T) {
	a := moeRecordArgs()
	rec := argsRecord(a, 1).Model
	want := map[string]string{
		"layernorm_epsilon": "1e-05", "add_bias_linear": "false", "bias_activation_fusion": "false",
		"num_moe_experts": "4", "moe_layer_freq": "2", "moe_ffn_hidden_size": "48", "moe_shared_expert_intermediate_size": "16",
		"moe_router_score_function": "sigmoid", "moe_router_num_groups": "2", "moe_router_group_topk": "1",
		"moe_router_topk_scaling_factor": "2.5", "moe_router_load_balancing_type": "seq_aux_loss", "moe_aux_loss_coeff": "0.01",
		"moe_z_loss_coeff": "0.001", "moe_router_enable_expert_bias": "true", "moe_router_bias_update_rate": "0.01",
		"moe_expert_capacity_factor": "1.5", "moe_token_drop_policy": "position", "moe_pad_expert_input_to_capacity": "true",
	}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("recorded\n %v\nwant\n %v", rec, want)
	}
	a.Model.MoERouterTopK, a.Model.MoERouterPreSoftmax, a.Model.MoELayerFreq = 1, true, []int{1, 0}
	rec = argsRecord(a, 1).Model
	if rec["moe_router_topk"] != "1" || rec["moe_router_pre_softmax"] != "true" || rec["moe_layer_freq"] != "[1,0]" {
		t.Errorf("top-1 pre-softmax, pattern [1,0]: recorded %v", rec)
	}

	m := DefaultArgs().Model
	if err := applyModelRecord(&m, rec); err != nil {
		t.Fatal(err)
	}
	w := a.Model
	w.MoETokenDispatcherType, w.MoEGroupedGEMM = "allgather", false // not recorded: the run's
	if !reflect.DeepEqual(m.MoE, w.MoE) {
		t.Errorf("taken back:\n %+v\nwant\n %+v", m.MoE, w.MoE)
	}

	dense := tpArgs(1, 1)
	dense.Model.MoERouterTopK, dense.Model.MoERouterScoreFunction, dense.Model.MoEAuxLossCoeff = 4, "sigmoid", 0.5
	for k := range argsRecord(dense, 1).Model {
		if strings.Contains(k, "moe") {
			t.Errorf("a dense model records %s", k)
		}
	}
}

// TestMoECompare: a resume whose MoE options differ from the
// checkpoint's is refused naming each flag; the same model spelled
// otherwise (the layer frequency as a pattern, the expert width as the
// FFN's) and another dispatcher resume; options a model does not read
// (the bias rate without the bias, the drop policy without a capacity)
// are not compared.
func TestMoECompare(t *testing.T) {
	saved := moeRecordArgs()
	rec := argsRecord(saved, 1)
	for _, c := range []struct {
		change func(m *config.TransformerConfig)
		want   []string
	}{
		{func(m *config.TransformerConfig) { m.NumMoEExperts = 0 }, []string{"--num-experts 4 in the checkpoint, unset in this run"}},
		{func(m *config.TransformerConfig) { m.NumMoEExperts = 8 }, []string{"--num-experts 4 in the checkpoint, 8 in this run"}},
		{func(m *config.TransformerConfig) { m.MoELayerFreq = nil }, []string{"--moe-layer-freq 2 in the checkpoint, 1 in this run"}},
		{func(m *config.TransformerConfig) { m.MoELayerFreq = []int{0, 1} }, []string{"--moe-layer-freq 2 in the checkpoint, [0,1] in this run"}},
		{func(m *config.TransformerConfig) { m.MoEFFNHiddenSize = 0 }, []string{"--moe-ffn-hidden-size 48 in the checkpoint, 128 in this run"}},
		{func(m *config.TransformerConfig) { m.MoESharedExpertIntermediateSize = 0 },
			[]string{"--moe-shared-expert-intermediate-size 16 in the checkpoint, 0 in this run"}},
		{func(m *config.TransformerConfig) { m.MoERouterTopK, m.MoERouterPreSoftmax = 1, true },
			[]string{"--moe-router-topk 2 in the checkpoint, 1 in this run", "--moe-router-pre-softmax in this run, not in the checkpoint"}},
		{func(m *config.TransformerConfig) {
			m.MoERouterScoreFunction, m.MoERouterEnableExpertBias = "softmax", false
		}, []string{"--moe-router-score-function sigmoid in the checkpoint, softmax in this run", "--moe-router-enable-expert-bias in the checkpoint, not in this run"}},
		{func(m *config.TransformerConfig) { m.MoERouterNumGroups, m.MoERouterGroupTopK = 0, 0 },
			[]string{"--moe-router-num-groups 2 in the checkpoint, 0 in this run", "--moe-router-group-topk 1 in the checkpoint, 0 in this run"}},
		{func(m *config.TransformerConfig) { m.MoERouterTopKScalingFactor = 0 }, []string{"--moe-router-topk-scaling-factor 2.5 in the checkpoint, 0 in this run"}},
		{func(m *config.TransformerConfig) {
			m.MoERouterLoadBalancingType, m.MoEAuxLossCoeff, m.MoEZLossCoeff = "aux_loss", 0, 0
		},
			[]string{"--moe-router-load-balancing-type seq_aux_loss in the checkpoint, aux_loss in this run",
				"--moe-aux-loss-coeff 0.01 in the checkpoint, 0 in this run", "--moe-z-loss-coeff 0.001 in the checkpoint, 0 in this run"}},
		{func(m *config.TransformerConfig) { m.MoERouterBiasUpdateRate = 1e-3 }, []string{"--moe-router-bias-update-rate 0.01 in the checkpoint, 0.001 in this run"}},
		{func(m *config.TransformerConfig) {
			m.MoETokenDropPolicy, m.MoEPadExpertInputToCapacity = "probs", false
		},
			[]string{"--moe-token-drop-policy position in the checkpoint, probs in this run", "--moe-pad-expert-input-to-capacity in the checkpoint, not in this run"}},
		{func(m *config.TransformerConfig) { m.MoEExpertCapacityFactor = 0 }, []string{"--moe-expert-capacity-factor 1.5 in the checkpoint, 0 in this run"}},
	} {
		a := moeRecordArgs()
		c.change(&a.Model)
		err := compareArgs(a, rec, false)
		if err == nil {
			t.Errorf("%v: resumed", c.want)
			continue
		}
		for _, w := range append(c.want, "--use-checkpoint-args takes the model's shape and options from the checkpoint") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q:\n%v", w, err)
			}
		}
	}

	for _, same := range []func(m *config.TransformerConfig){
		func(m *config.TransformerConfig) { m.MoELayerFreq = []int{1, 0} },
		func(m *config.TransformerConfig) { m.MoETokenDispatcherType, m.MoEGroupedGEMM = "allgather", false },
	} {
		a := moeRecordArgs()
		same(&a.Model)
		if err := compareArgs(a, rec, false); err != nil {
			t.Errorf("the same model: %v", err)
		}
	}
	a := moeRecordArgs()
	a.Model.MoEFFNHiddenSize, a.Model.FFNHiddenSize = 0, 48
	saved.Model.FFNHiddenSize = 48
	if err := compareArgs(a, argsRecord(saved, 1), false); err != nil {
		t.Errorf("the expert width as the FFN's: %v", err)
	}
	// Compared before validation: any number of layers.
	for _, n := range []int{-1, 0, 1 << 40} {
		a := moeRecordArgs()
		a.Model.NumLayers = n
		if err := compareArgs(a, rec, true); err == nil || !strings.Contains(err.Error(), "--num-layers 2 in the checkpoint") {
			t.Errorf("--num-layers %d: %v", n, err)
		}
	}
	// The expert width as it was: the checkpoint's FFN, not this run's.
	ffn := moeRecordArgs()
	ffn.Model.MoEFFNHiddenSize = 0
	a = moeRecordArgs()
	a.Model.FFNHiddenSize = 64
	if err := compareArgs(a, argsRecord(ffn, 1), false); err == nil || !strings.Contains(err.Error(), "--moe-ffn-hidden-size 128 in the checkpoint, 48 in this run") {
		t.Errorf("--ffn-hidden-size 64 --moe-ffn-hidden-size 48 against the default widths: %v", err)
	}
	b, c := moeRecordArgs(), moeRecordArgs()
	b.Model.MoERouterEnableExpertBias, c.Model.MoERouterEnableExpertBias, c.Model.MoERouterBiasUpdateRate = false, false, 0.5
	b.Model.MoEExpertCapacityFactor, c.Model.MoEExpertCapacityFactor, c.Model.MoETokenDropPolicy = 0, 0, "probs"
	b.Model.MoEPadExpertInputToCapacity, c.Model.MoEPadExpertInputToCapacity = false, false
	if err := compareArgs(c, argsRecord(b, 1), false); err != nil {
		t.Errorf("options the model does not read: %v", err)
	}
}

// TestMoERecordDamaged: a record of MoE options that are not valid, or
// not of their kind, is refused as damaged.
func TestMoERecordDamaged(t *testing.T) {
	for _, rec := range []map[string]string{
		{"num_moe_experts": "-1"},
		{"num_moe_experts": "4", "moe_router_score_function": "relu"},
		{"num_moe_experts": "4", "moe_layer_freq": "[1,0"},
		{"num_moe_experts": "4", "moe_aux_loss_coeff": "NaN"},
		{"num_moe_experts": "4", "moe_router_topk": "two"},
	} {
		m := DefaultArgs().Model
		if err := applyModelRecord(&m, rec); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("%v: %v, want a damaged-manifest error", rec, err)
		}
	}
}
