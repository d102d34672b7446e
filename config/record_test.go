package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestRecordDefault: the default model's record lists only the epsilon
// (which tells a record from an older checkpoint's absent one), and a
// dense model lists no MoE option whatever its MoE fields hold.
func TestRecordDefault(t *testing.T) {
	c := DefaultTransformerConfig()
	want := map[string]string{"layernorm_epsilon": "1e-05"}
	if got := c.Record(); !reflect.DeepEqual(got, want) {
		t.Errorf("Record of the default model = %v, want %v", got, want)
	}
	c.MoERouterTopK, c.MoEAuxLossCoeff = 4, 0.5 // not read without experts
	if got := c.Record(); !reflect.DeepEqual(got, want) {
		t.Errorf("Record of a dense model with MoE fields set = %v, want %v", got, want)
	}
}

// TestRecordRoundTrip: ApplyRecord of a model's record onto the default
// model gives back every recorded option; an option the record does not
// list returns to its default.
func TestRecordRoundTrip(t *testing.T) {
	c := DefaultTransformerConfig()
	c.Normalization, c.LayernormEpsilon, c.QKLayernorm = RMSNormType, 1e-6, true
	c.ActivationFunc, c.GatedLinearUnit, c.AddBiasLinear, c.BiasActivationFusion = SiLU, true, false, false
	c.NumQueryGroups, c.PositionEmbeddingType, c.RotaryBase, c.RotaryPercent = 2, "rope", 500000, 0.5
	c.ShareEmbeddingsAndOutputWeights = false
	c.NumMoEExperts, c.MoELayerFreq, c.MoERouterTopK, c.MoERouterScoreFunction = 4, []int{2}, 2, "sigmoid"
	c.MoEAuxLossCoeff, c.MoEExpertCapacityFactor, c.MoETokenDropPolicy = 1e-2, 1.5, "position"
	rec := c.Record()
	got := DefaultTransformerConfig()
	got.QKLayernorm = false
	got.MoEZLossCoeff = 0.25 // not in the record: back to its default
	if err := got.ApplyRecord(rec); err != nil {
		t.Fatal(err)
	}
	if got.MoEZLossCoeff != DefaultTransformerConfig().MoEZLossCoeff {
		t.Errorf("an option the record does not list kept %v, want its default", got.MoEZLossCoeff)
	}
	if again := got.Record(); !reflect.DeepEqual(again, rec) {
		t.Errorf("record after ApplyRecord = %v, want %v", again, rec)
	}
	if got.Normalization != RMSNormType || got.LayernormEpsilon != 1e-6 || got.RotaryBase != 500000 || !reflect.DeepEqual(got.MoELayerFreq, []int{2}) {
		t.Errorf("ApplyRecord gave %+v", got)
	}
}

// TestApplyRecordErrors: an unknown key is an *UnknownOptionsError with
// the keys sorted; a value not of its kind and an invalid model are
// errors naming the option; a record without the epsilon keeps c's.
func TestApplyRecordErrors(t *testing.T) {
	c := DefaultTransformerConfig()
	err := c.ApplyRecord(map[string]string{"zeta": "1", "alpha": "2", "qk_layernorm": "true"})
	var unknown *UnknownOptionsError
	if !errors.As(err, &unknown) || !reflect.DeepEqual(unknown.Keys, []string{"alpha", "zeta"}) {
		t.Errorf("unknown keys: %v, want an UnknownOptionsError of [alpha zeta]", err)
	}
	for rec, want := range map[string]map[string]string{
		"qk_layernorm":    {"qk_layernorm": "maybe"},
		"kv_channels":     {"kv_channels": "-5"},
		"moe_router_topk": {"num_moe_experts": "4", "moe_router_topk": "two"},
		"moe_layer_freq":  {"num_moe_experts": "4", "moe_layer_freq": "[1,0"},
		"num_moe_experts": {"num_moe_experts": "-1"},
	} {
		c := DefaultTransformerConfig()
		if err := c.ApplyRecord(want); err == nil || !strings.Contains(err.Error(), rec) {
			t.Errorf("%v: %v, want an error naming %s", want, err, rec)
		}
	}
	c = DefaultTransformerConfig()
	c.LayernormEpsilon = 1e-3
	if err := c.ApplyRecord(nil); err != nil || c.LayernormEpsilon != 1e-3 {
		t.Errorf("an old (absent) record: epsilon %g (%v), want 0.001 kept", c.LayernormEpsilon, err)
	}
}

// FuzzApplyRecord: a record of any keys and values (a manifest's, which a
// damaged file can make anything) never panics; it is applied only when
// every key is known and every value of its option's kind, and then the
// config it gives is valid and its record, applied to a fresh config,
// records the same again.
func FuzzApplyRecord(f *testing.F) {
	for _, kv := range [][2]string{
		{"layernorm_epsilon", "1e-06"}, {"normalization", "RMSNorm"}, {"kv_channels", "-5"},
		{"rotary_percent", "half"}, {"num_moe_experts", "4"}, {"moe_layer_freq", "[1,0"},
		{"moe_aux_loss_coeff", "NaN"}, {"multi_latent_attention", "true"}, {"qk_layernorm", "maybe"},
		{"position_embedding_type", "rope"}, {"num_query_groups", "0"}, {"activation_func", "silu"},
	} {
		f.Add(kv[0], kv[1], "num_moe_experts", "4")
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		rec := map[string]string{k1: v1, k2: v2}
		c := DefaultTransformerConfig()
		err := c.ApplyRecord(rec)
		if err != nil {
			_ = err.Error()
			return
		}
		if err := c.ValidateModelOptions(); err != nil {
			t.Fatalf("%v applied, but the model is not valid: %v", rec, err)
		}
		again := DefaultTransformerConfig()
		if err := again.ApplyRecord(c.Record()); err != nil {
			t.Fatalf("%v: the record of the applied config %v does not apply: %v", rec, c.Record(), err)
		}
		if !reflect.DeepEqual(again.Record(), c.Record()) {
			t.Fatalf("%v: record %v, applied again %v", rec, c.Record(), again.Record())
		}
	})
}
