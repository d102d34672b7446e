package hf

import (
	"fmt"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/config"
)

// gpt2Config is config.json for cfg as GPT2LMHeadModel. GELU in its tanh
// form (gotron's with fused biases, --openai-gelu) is gelu_new, the erf
// form gelu; n_inner is null for the default 4·h.
func gpt2Config(c config.TransformerConfig) map[string]any {
	act := "gelu"
	if c.TanhGELU() {
		act = "gelu_new"
	}
	var inner any
	if c.FFN() != 4*c.HiddenSize {
		inner = c.FFN()
	}
	return map[string]any{
		"architectures": []string{"GPT2LMHeadModel"}, "model_type": GPT2,
		"vocab_size": c.VocabSize, "n_positions": c.MaxPositions(), "n_embd": c.HiddenSize,
		"n_layer": c.NumLayers, "n_head": c.NumAttentionHeads, "n_inner": inner,
		"activation_function": act, "layer_norm_epsilon": float32Number(c.LayernormEpsilon),
		"resid_pdrop": float32Number(c.HiddenDropout), "embd_pdrop": float32Number(c.HiddenDropout),
		"attn_pdrop": float32Number(c.AttentionDropout), "tie_word_embeddings": c.ShareEmbeddingsAndOutputWeights,
		"scale_attn_weights": true, "torch_dtype": "float32",
	}
}

// gpt2FromConfig is the gotron config of a GPT-2 config.json.
func gpt2FromConfig(m map[string]any) (config.TransformerConfig, error) {
	r := reader{m: m}
	c := config.DefaultTransformerConfig()
	c.VocabSize, c.MaxPositionEmbeddings = r.int("vocab_size", -1), r.int("n_positions", 1024)
	c.HiddenSize, c.NumLayers, c.NumAttentionHeads = r.int("n_embd", 768), r.int("n_layer", 12), r.int("n_head", 12)
	c.FFNHiddenSize = r.int("n_inner", 4*c.HiddenSize)
	c.LayernormEpsilon = float32(r.float("layer_norm_epsilon", 1e-5))
	c.HiddenDropout, c.AttentionDropout = float32(r.float("resid_pdrop", 0.1)), float32(r.float("attn_pdrop", 0.1))
	c.ShareEmbeddingsAndOutputWeights = r.bool("tie_word_embeddings", true)
	c.PositionEmbeddingType, c.Normalization, c.AddBiasLinear = config.LearnedAbsolute, config.LayerNormType, true
	if c.SeqLength <= 0 || c.SeqLength > c.MaxPositionEmbeddings {
		c.SeqLength = c.MaxPositionEmbeddings // (for validation: --seq-length is the run's)
	}
	switch act := r.string("activation_function", "gelu_new"); act {
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		c.ActivationFunc, c.BiasActivationFusion = config.GELU, true // the tanh form with the fused bias
	case "gelu":
		c.ActivationFunc, c.BiasActivationFusion = config.GELU, false // the erf form
	default:
		r.fail("activation_function %q: gotron's GPT-2 has gelu_new (tanh) and gelu (erf)", act)
	}
	r.want("scale_attn_weights", true, "gotron scales the attention scores by 1/√head_dim")
	r.want("scale_attn_by_inverse_layer_idx", false, "gotron does not scale the scores by layer")
	r.want("add_cross_attention", false, "gotron's GPT has no cross-attention")
	return c, r.err()
}

// exportGPT2 puts the GPT-2 tensors of cfg's weights w into out: every
// linear weight transposed (Conv1D), the attention's rows from
// Megatron's per-head q, k, v to [q | k | v], biases of zeros where the
// model has none (--disable-bias-linear).
func exportGPT2(c config.TransformerConfig, w *weights, out *Model) error {
	h, f, v, p := c.HiddenSize, c.FFN(), c.VocabSize, c.MaxPositions()
	qkv := qkvLayout{c.NumAttentionHeads, c.NumAttentionHeads, c.HeadDim()}
	t := &taker{w: w}
	put := func(name string, m mat) { t.put(&out.Tensors, name, m) }
	bias := func(name string, n int) mat {
		if w.has(name) {
			return t.take(name, n)
		}
		return zeros(n)
	}
	put("transformer.wte.weight", t.take("embedding.word_embeddings.weight", v, h))
	put("transformer.wpe.weight", t.take("embedding.position_embeddings.weight", p, h))
	for i := range c.NumLayers {
		if t.err != nil {
			break
		}
		g, hf := fmt.Sprintf("decoder.layers.%d.", i), fmt.Sprintf("transformer.h.%d.", i)
		put(hf+"ln_1.weight", t.take(g+"input_layernorm.weight", h))
		put(hf+"ln_1.bias", t.take(g+"input_layernorm.bias", h))
		q, k, vv := qkv.split(t.take(g+"self_attention.linear_qkv.weight", 3*h, h))
		put(hf+"attn.c_attn.weight", catRows(q, k, vv).transpose())
		qb, kb, vb := qkv.split(bias(g+"self_attention.linear_qkv.bias", 3*h))
		put(hf+"attn.c_attn.bias", catRows(qb, kb, vb))
		put(hf+"attn.c_proj.weight", t.take(g+"self_attention.linear_proj.weight", h, h).transpose())
		put(hf+"attn.c_proj.bias", bias(g+"self_attention.linear_proj.bias", h))
		put(hf+"ln_2.weight", t.take(g+"pre_mlp_layernorm.weight", h))
		put(hf+"ln_2.bias", t.take(g+"pre_mlp_layernorm.bias", h))
		put(hf+"mlp.c_fc.weight", t.take(g+"mlp.linear_fc1.weight", f, h).transpose())
		put(hf+"mlp.c_fc.bias", bias(g+"mlp.linear_fc1.bias", f))
		put(hf+"mlp.c_proj.weight", t.take(g+"mlp.linear_fc2.weight", h, f).transpose())
		put(hf+"mlp.c_proj.bias", bias(g+"mlp.linear_fc2.bias", h))
	}
	put("transformer.ln_f.weight", t.take("decoder.final_layernorm.weight", h))
	put("transformer.ln_f.bias", t.take("decoder.final_layernorm.bias", h))
	if !c.ShareEmbeddingsAndOutputWeights {
		put("lm_head.weight", t.take("output_layer.weight", v, h))
	}
	return t.err
}

// importGPT2 is exportGPT2's inverse. The names may go without the
// "transformer." prefix (the original GPT-2 files); the attention's
// causal-mask buffers (attn.bias, attn.masked_bias) some files hold are
// dropped, and a tied lm_head.weight is the word embedding again.
func importGPT2(c config.TransformerConfig, w *weights) ([]safetensors.Tensor, error) {
	h, f, v, p := c.HiddenSize, c.FFN(), c.VocabSize, c.MaxPositions()
	qkv := qkvLayout{c.NumAttentionHeads, c.NumAttentionHeads, c.HeadDim()}
	pre := ""
	if w.has("transformer.wte.weight") {
		pre = "transformer."
	}
	t := &taker{w: w}
	var out []safetensors.Tensor
	put := func(name string, m mat) { t.put(&out, name, m) }
	put("embedding.word_embeddings.weight", t.take(pre+"wte.weight", v, h))
	put("embedding.position_embeddings.weight", t.take(pre+"wpe.weight", p, h))
	for i := range c.NumLayers {
		if t.err != nil {
			break
		}
		g, hf := fmt.Sprintf("decoder.layers.%d.", i), fmt.Sprintf("%sh.%d.", pre, i)
		for _, buf := range []string{"attn.bias", "attn.masked_bias"} {
			w.skip(hf + buf)
		}
		put(g+"input_layernorm.weight", t.take(hf+"ln_1.weight", h))
		put(g+"input_layernorm.bias", t.take(hf+"ln_1.bias", h))
		all := t.take(hf+"attn.c_attn.weight", h, 3*h).transpose()
		put(g+"self_attention.linear_qkv.weight", qkv.megatron(all.slice(0, h), all.slice(h, 2*h), all.slice(2*h, 3*h)))
		b := t.take(hf+"attn.c_attn.bias", 3*h)
		put(g+"self_attention.linear_qkv.bias", qkv.megatron(b.slice(0, h), b.slice(h, 2*h), b.slice(2*h, 3*h)))
		put(g+"self_attention.linear_proj.weight", t.take(hf+"attn.c_proj.weight", h, h).transpose())
		put(g+"self_attention.linear_proj.bias", t.take(hf+"attn.c_proj.bias", h))
		put(g+"pre_mlp_layernorm.weight", t.take(hf+"ln_2.weight", h))
		put(g+"pre_mlp_layernorm.bias", t.take(hf+"ln_2.bias", h))
		put(g+"mlp.linear_fc1.weight", t.take(hf+"mlp.c_fc.weight", h, f).transpose())
		put(g+"mlp.linear_fc1.bias", t.take(hf+"mlp.c_fc.bias", f))
		put(g+"mlp.linear_fc2.weight", t.take(hf+"mlp.c_proj.weight", f, h).transpose())
		put(g+"mlp.linear_fc2.bias", t.take(hf+"mlp.c_proj.bias", h))
	}
	put("decoder.final_layernorm.weight", t.take(pre+"ln_f.weight", h))
	put("decoder.final_layernorm.bias", t.take(pre+"ln_f.bias", h))
	if c.ShareEmbeddingsAndOutputWeights {
		w.skip("lm_head.weight")
	} else {
		put("output_layer.weight", t.take("lm_head.weight", v, h))
	}
	return out, t.err
}
