// Package hf converts a gotron model to and from Hugging Face's checkpoint
// layout for two families: GPT-2 (GPT2LMHeadModel) and Llama
// (LlamaForCausalLM). A Hugging Face checkpoint is a directory with
// config.json, the family's settings, and model.safetensors, its weights
// by the family's names; gotron's are Megatron's names with the real
// vocabulary (ckpt's whole tensors).
//
// The weights move between the layouts exactly (a copy, a transpose or a
// reordering of rows, no arithmetic), so a conversion and its inverse give
// the same bits:
//
//   - GPT-2 keeps its linear layers as Conv1D, weight [in, out]: every
//     weight is transposed. Its c_attn output is [q | k | v], each head
//     after head; Megatron's linear_qkv rows are head 0's q, k, v, then
//     head 1's (grouped: each query group's query heads, then its key and
//     value heads).
//   - Llama keeps q_proj, k_proj and v_proj apart (grouped-query: fewer
//     key and value heads), gate_proj and up_proj apart where Megatron's
//     linear_fc1 stacks [gate; up]. Both rotate queries and keys by halves
//     (rotate_half), so the weights need no permutation; a gotron model
//     with --rotary-interleaved rotates adjacent pairs instead, and its
//     query and key rows are permuted within each head to the halves form.
//
// A model neither family can express (MoE, MLA, MTP, other norms or
// activations, biases Llama does not have, partial rotary …) is refused
// with every reason at once.
package hf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/config"
)

// The families, as config.json's model_type names them.
const (
	GPT2  = "gpt2"
	Llama = "llama"
)

// Model is a Hugging Face checkpoint: config.json's document and the
// weights of model.safetensors by the family's names.
type Model struct {
	Config  map[string]any
	Tensors []safetensors.Tensor
}

// Family returns the model_type of m's config.
func (m *Model) Family() string {
	s, _ := m.Config["model_type"].(string)
	return s
}

// Export returns the Hugging Face form of a gotron model: cfg is its
// config, tensors its whole weights by gotron's names (float32, F16 or
// BF16; the real vocabulary's rows). The weights are written in float32.
func Export(cfg config.TransformerConfig, tensors []safetensors.Tensor) (*Model, error) {
	fam, err := FamilyOf(cfg)
	if err != nil {
		return nil, err
	}
	w, err := newWeights(tensors, "the gotron model")
	if err != nil {
		return nil, err
	}
	out := &Model{}
	if fam == GPT2 {
		out.Config, err = gpt2Config(cfg), exportGPT2(cfg, w, out)
	} else {
		out.Config, err = llamaConfig(cfg), exportLlama(cfg, w, out)
	}
	if err != nil {
		return nil, err
	}
	if extra := w.unused(); len(extra) > 0 {
		return nil, fmt.Errorf("hf: the gotron model holds tensors the %s layout has no place for: %s", fam, strings.Join(extra, ", "))
	}
	slices.SortFunc(out.Tensors, func(a, b safetensors.Tensor) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Import returns the gotron config and whole weights (float32, by
// gotron's names) of a Hugging Face checkpoint.
func Import(m *Model) (config.TransformerConfig, []safetensors.Tensor, error) {
	w, err := newWeights(m.Tensors, "model.safetensors")
	if err != nil {
		return config.TransformerConfig{}, nil, err
	}
	var cfg config.TransformerConfig
	from, weightsOf := gpt2FromConfig, importGPT2
	switch fam := m.Family(); fam {
	case GPT2:
	case Llama:
		from, weightsOf = llamaFromConfig, importLlama
	default:
		return cfg, nil, fmt.Errorf("hf: config.json's model_type is %q: gotron converts %q (GPT2LMHeadModel) and %q (LlamaForCausalLM)", fam, GPT2, Llama)
	}
	if cfg, err = from(m.Config); err != nil {
		return cfg, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("hf: config.json gives a model gotron cannot build: %w", err)
	}
	out, err := weightsOf(cfg, w)
	if err != nil {
		return cfg, nil, err
	}
	if extra := w.unused(); len(extra) > 0 {
		return cfg, nil, fmt.Errorf("hf: model.safetensors holds tensors the %s family has no place for in gotron: %s", m.Family(), strings.Join(extra, ", "))
	}
	slices.SortFunc(out, func(a, b safetensors.Tensor) int { return strings.Compare(a.Name, b.Name) })
	return cfg, out, nil
}

// FamilyOf returns the Hugging Face family that expresses cfg: GPT-2 for
// LayerNorm, learned absolute positions, GELU and multi-head attention;
// Llama for RMSNorm, rotary positions, SwiGLU and no biases. Otherwise it
// lists what keeps cfg out of each.
func FamilyOf(cfg config.TransformerConfig) (string, error) {
	common := commonViolations(cfg)
	gpt2, llama := append(slices.Clone(common), gpt2Violations(cfg)...), append(slices.Clone(common), llamaViolations(cfg)...)
	switch {
	case len(gpt2) == 0:
		return GPT2, nil
	case len(llama) == 0:
		return Llama, nil
	case cfg.RMSNorm() || cfg.UsesRoPE():
		return "", fmt.Errorf("hf: the model is not of the Llama family (LlamaForCausalLM): %s", strings.Join(llama, "; "))
	}
	return "", fmt.Errorf("hf: the model is not of the GPT-2 family (GPT2LMHeadModel): %s", strings.Join(gpt2, "; "))
}

// commonViolations are the options neither family has.
func commonViolations(c config.TransformerConfig) []string {
	var out []string
	add := func(bad bool, s string) {
		if bad {
			out = append(out, s)
		}
	}
	add(c.NumMoEExperts > 0, "it has MoE layers (--num-experts)")
	add(c.MultiLatentAttention, "it has multi-latent attention")
	add(c.MTPNumLayers > 0, "it has multi-token-prediction depths (--mtp-num-layers)")
	add(c.QKLayernorm, "it normalises queries and keys (--qk-layernorm)")
	add(c.LayernormZeroCenteredGamma, "its norms are zero-centred (--apply-layernorm-1p)")
	add(c.ApplyResidualConnectionPostLayernorm, "its residuals start after the norms (--apply-residual-connection-post-layernorm)")
	return out
}

func gpt2Violations(c config.TransformerConfig) []string {
	var out []string
	add := func(bad bool, s string) {
		if bad {
			out = append(out, s)
		}
	}
	add(c.RMSNorm(), "GPT-2 uses LayerNorm, the model RMSNorm")
	add(!c.LearnedPositions(), fmt.Sprintf("GPT-2 learns absolute positions, the model's are %s", c.PositionEmbedding()))
	add(c.GatedLinearUnit, "GPT-2's MLP is not gated (--swiglu)")
	add(c.Activation() != config.GELU && c.Activation() != config.OpenAIGELU, fmt.Sprintf("GPT-2's activation is GELU, the model's %s", c.Activation()))
	add(c.QueryGroups() != c.NumAttentionHeads, "GPT-2's attention has a key and value per head (--num-query-groups)")
	add(c.HeadDim()*c.NumAttentionHeads != c.HiddenSize, "GPT-2's heads are hidden/heads wide (--kv-channels)")
	add(c.AddQKVBias && !c.AddBiasLinear, "GPT-2 has every bias or none of them (--add-qkv-bias)")
	return out
}

func llamaViolations(c config.TransformerConfig) []string {
	var out []string
	add := func(bad bool, s string) {
		if bad {
			out = append(out, s)
		}
	}
	add(!c.RMSNorm(), "Llama uses RMSNorm, the model LayerNorm")
	add(!c.UsesRoPE(), fmt.Sprintf("Llama rotates positions (rope), the model's are %s", c.PositionEmbedding()))
	add(!c.GatedLinearUnit || c.Activation() != config.SiLU, "Llama's MLP is SwiGLU (--swiglu)")
	add(c.AddBiasLinear || c.AddQKVBias, "Llama's linear layers have no biases (--disable-bias-linear, no --add-qkv-bias)")
	add(c.UsesRoPE() && c.RotaryDim() != c.HeadDim(), "Llama rotates whole heads (--rotary-percent 1)")
	return out
}
