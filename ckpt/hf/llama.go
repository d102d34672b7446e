package hf

import (
	"fmt"
	"math"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/config"
)

// llamaConfig is config.json for cfg as LlamaForCausalLM; head_dim only
// where it is not hidden/heads.
func llamaConfig(c config.TransformerConfig) map[string]any {
	m := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": Llama,
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "intermediate_size": c.FFN(),
		"num_hidden_layers": c.NumLayers, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.QueryGroups(), "max_position_embeddings": c.MaxPositions(),
		"rms_norm_eps": float32Number(c.LayernormEpsilon), "rope_theta": float64(c.RotaryBase), "rope_scaling": nil,
		"hidden_act": "silu", "tie_word_embeddings": c.ShareEmbeddingsAndOutputWeights,
		"attention_bias": false, "mlp_bias": false, "attention_dropout": float32Number(c.AttentionDropout),
		"torch_dtype": "float32",
	}
	if c.HeadDim()*c.NumAttentionHeads != c.HiddenSize {
		m["head_dim"] = c.HeadDim()
	}
	return m
}

// llamaFromConfig is the gotron config of a Llama config.json.
func llamaFromConfig(m map[string]any) (config.TransformerConfig, error) {
	r := reader{m: m}
	c := config.DefaultTransformerConfig()
	c.VocabSize, c.HiddenSize, c.FFNHiddenSize = r.int("vocab_size", -1), r.int("hidden_size", 4096), r.int("intermediate_size", 11008)
	c.NumLayers, c.NumAttentionHeads = r.int("num_hidden_layers", 32), r.int("num_attention_heads", 32)
	c.NumQueryGroups = r.int("num_key_value_heads", c.NumAttentionHeads)
	if d := r.int("head_dim", 0); d > 0 && d*c.NumAttentionHeads != c.HiddenSize {
		c.KVChannels = d
	}
	c.MaxPositionEmbeddings = r.int("max_position_embeddings", 2048)
	if c.SeqLength <= 0 || c.SeqLength > c.MaxPositionEmbeddings {
		c.SeqLength = c.MaxPositionEmbeddings // (for validation: --seq-length is the run's)
	}
	c.LayernormEpsilon = float32(r.float("rms_norm_eps", 1e-6))
	theta := ropeTheta(&r)
	if theta != math.Trunc(theta) || theta < 1 || theta > math.MaxInt32 {
		r.fail("rope_theta %g: gotron's rotary base is a whole number (--rotary-base)", theta)
	}
	c.RotaryBase = int(theta)
	c.ShareEmbeddingsAndOutputWeights = r.bool("tie_word_embeddings", false)
	c.Normalization, c.ActivationFunc, c.GatedLinearUnit = config.RMSNormType, config.SiLU, true
	c.PositionEmbeddingType, c.RotaryPercent, c.AddBiasLinear = config.RoPE, 1, false
	c.HiddenDropout, c.AttentionDropout = 0, float32(r.float("attention_dropout", 0))
	if act := r.string("hidden_act", "silu"); act != "silu" {
		r.fail("hidden_act %q: Llama's SwiGLU is silu", act)
	}
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		if t := ropeType(m[key]); t != "" && t != "default" {
			r.fail("%s %v: gotron rotates Llama's queries and keys without scaling (rope_type default; Llama 3.1's and YaRN's are not built)", key, m[key])
		}
	}
	r.want("attention_bias", false, "gotron's Llama has no attention biases")
	r.want("mlp_bias", false, "gotron's Llama has no MLP biases")
	return c, r.err()
}

// ropeTheta is the rotary base: rope_theta, where transformers 4 keeps
// it, or rope_parameters.rope_theta (transformers 5); both must agree.
func ropeTheta(r *reader) float64 {
	top := r.float("rope_theta", 10000)
	rp, set := r.m["rope_parameters"]
	if !set || rp == nil {
		return top
	}
	p, ok := rp.(map[string]any)
	if !ok || p["rope_theta"] == nil {
		r.fail("rope_parameters %v: gotron reads Llama's rotary base from rope_parameters.rope_theta, which it lacks", rp)
		return top
	}
	inner := (&reader{m: p}).float("rope_theta", top)
	if _, set := r.m["rope_theta"]; set && inner != top {
		r.fail("rope_theta %g and rope_parameters.rope_theta %g disagree", top, inner)
	}
	return inner
}

// ropeType is the rope_type (or, in older files, type) of a rope_scaling
// or rope_parameters object; "" for none, "?" for a value that is no
// such object.
func ropeType(v any) string {
	if v == nil {
		return ""
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "?"
	}
	for _, k := range []string{"rope_type", "type"} {
		if t, ok := m[k].(string); ok {
			return t
		}
	}
	if _, scaled := m["factor"]; scaled {
		return "?" // a scaling without its type
	}
	return "default"
}

// exportLlama puts the Llama tensors of cfg's weights w into out:
// linear_qkv's groups into q_proj, k_proj and v_proj (rows permuted from
// pairs to halves under --rotary-interleaved), linear_fc1 into
// gate_proj and up_proj.
func exportLlama(c config.TransformerConfig, w *weights, out *Model) error {
	h, f, v, d := c.HiddenSize, c.FFN(), c.VocabSize, c.HeadDim()
	qkv := qkvLayout{c.NumAttentionHeads, c.QueryGroups(), d}
	t := &taker{w: w}
	put := func(name string, m mat) { t.put(&out.Tensors, name, m) }
	rot := func(m mat) mat {
		if c.RotaryInterleaved {
			return halvesFromPairs(m, d, false)
		}
		return m
	}
	put("model.embed_tokens.weight", t.take("embedding.word_embeddings.weight", v, h))
	for i := range c.NumLayers {
		if t.err != nil {
			break
		}
		g, hf := fmt.Sprintf("decoder.layers.%d.", i), fmt.Sprintf("model.layers.%d.", i)
		put(hf+"input_layernorm.weight", t.take(g+"input_layernorm.weight", h))
		q, k, vv := qkv.split(t.take(g+"self_attention.linear_qkv.weight", c.QKVWidth(), h))
		put(hf+"self_attn.q_proj.weight", rot(q))
		put(hf+"self_attn.k_proj.weight", rot(k))
		put(hf+"self_attn.v_proj.weight", vv)
		put(hf+"self_attn.o_proj.weight", t.take(g+"self_attention.linear_proj.weight", h, c.AttentionWidth()))
		put(hf+"post_attention_layernorm.weight", t.take(g+"pre_mlp_layernorm.weight", h))
		fc1 := t.take(g+"mlp.linear_fc1.weight", 2*f, h)
		put(hf+"mlp.gate_proj.weight", fc1.slice(0, f))
		put(hf+"mlp.up_proj.weight", fc1.slice(f, 2*f))
		put(hf+"mlp.down_proj.weight", t.take(g+"mlp.linear_fc2.weight", h, f))
	}
	put("model.norm.weight", t.take("decoder.final_layernorm.weight", h))
	if !c.ShareEmbeddingsAndOutputWeights {
		put("lm_head.weight", t.take("output_layer.weight", v, h))
	}
	return t.err
}

// importLlama is exportLlama's inverse (gotron's Llama rotates halves, so
// no rows are permuted). A tied lm_head.weight is the word embedding.
func importLlama(c config.TransformerConfig, w *weights) ([]safetensors.Tensor, error) {
	h, f, v, d := c.HiddenSize, c.FFN(), c.VocabSize, c.HeadDim()
	g := c.QueryGroups()
	qkv := qkvLayout{c.NumAttentionHeads, g, d}
	t := &taker{w: w}
	var out []safetensors.Tensor
	put := func(name string, m mat) { t.put(&out, name, m) }
	put("embedding.word_embeddings.weight", t.take("model.embed_tokens.weight", v, h))
	for i := range c.NumLayers {
		if t.err != nil {
			break
		}
		gn, hf := fmt.Sprintf("decoder.layers.%d.", i), fmt.Sprintf("model.layers.%d.", i)
		w.skip(hf + "self_attn.rotary_emb.inv_freq") // a buffer older files hold
		put(gn+"input_layernorm.weight", t.take(hf+"input_layernorm.weight", h))
		q := t.take(hf+"self_attn.q_proj.weight", c.AttentionWidth(), h)
		k := t.take(hf+"self_attn.k_proj.weight", g*d, h)
		vv := t.take(hf+"self_attn.v_proj.weight", g*d, h)
		put(gn+"self_attention.linear_qkv.weight", qkv.megatron(q, k, vv))
		put(gn+"self_attention.linear_proj.weight", t.take(hf+"self_attn.o_proj.weight", h, c.AttentionWidth()))
		put(gn+"pre_mlp_layernorm.weight", t.take(hf+"post_attention_layernorm.weight", h))
		put(gn+"mlp.linear_fc1.weight", catRows(t.take(hf+"mlp.gate_proj.weight", f, h), t.take(hf+"mlp.up_proj.weight", f, h)))
		put(gn+"mlp.linear_fc2.weight", t.take(hf+"mlp.down_proj.weight", h, f))
	}
	put("decoder.final_layernorm.weight", t.take("model.norm.weight", h))
	if c.ShareEmbeddingsAndOutputWeights {
		w.skip("lm_head.weight")
	} else {
		put("output_layer.weight", t.take("lm_head.weight", v, h))
	}
	return out, t.err
}
