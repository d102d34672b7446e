package gpt

import (
	"fmt"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
)

// ParamSpec is one parameter of a model chunk as one tensor-parallel rank
// holds it: its name and its partition's shape.
type ParamSpec struct {
	Name  string
	Shape []int
	// SharedEmbedding marks the word embedding when it is tied across
	// pipeline stages (a pipeline of more than one stage, the chunk on the
	// first or the last stage).
	SharedEmbedding bool
}

// Numel is the number of elements of the partition.
func (s ParamSpec) Numel() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// ChunkParamSpecs lists the parameters one rank of a tensor-parallel group
// of tpSize holds for a chunk, in the reference's registration order
// (named_parameters), which the data-parallel buffers follow
// (megatron-semantics.md §2.15): the word and position embeddings on the
// first stage, then per layer input_layernorm, linear_proj, linear_qkv,
// pre_mlp_layernorm, linear_fc1, linear_fc2 (weight before bias), then the
// final layernorm and, on a last stage without the embedding, the output
// layer's copy of the tied word embedding. It allocates nothing, so
// inspection tools can lay out models of any size; RegisteredParameters
// gives a built chunk's parameters in the same order.
func ChunkParamSpecs(cfg config.TransformerConfig, tpSize int, spec ChunkSpec) ([]ParamSpec, error) {
	if tpSize < 1 || cfg.NumAttentionHeads%tpSize != 0 || cfg.FFN()%tpSize != 0 {
		return nil, fmt.Errorf("gpt: %d attention heads and ffn_hidden_size %d do not divide over %d tensor-parallel ranks", cfg.NumAttentionHeads, cfg.FFN(), tpSize)
	}
	h, f, vp := cfg.HiddenSize, cfg.FFN(), cfg.PaddedVocabSize()
	shared := cfg.PipelineModelParallelSize > 1
	var out []ParamSpec
	add := func(name string, shape ...int) { out = append(out, ParamSpec{Name: name, Shape: shape}) }
	word := ParamSpec{Name: "embedding.word_embeddings.weight", Shape: []int{vp / tpSize, h}, SharedEmbedding: shared}
	if spec.PreProcess {
		out = append(out, word)
		add("embedding.position_embeddings.weight", cfg.MaxPositions(), h)
	}
	for i := spec.LayerOffset; i < spec.LayerOffset+spec.NumLayers; i++ {
		p := fmt.Sprintf("decoder.layers.%d.", i)
		add(p+"input_layernorm.weight", h)
		add(p+"input_layernorm.bias", h)
		add(p+"self_attention.linear_proj.weight", h, h/tpSize)
		add(p+"self_attention.linear_proj.bias", h)
		add(p+"self_attention.linear_qkv.weight", 3*h/tpSize, h)
		add(p+"self_attention.linear_qkv.bias", 3*h/tpSize)
		add(p+"pre_mlp_layernorm.weight", h)
		add(p+"pre_mlp_layernorm.bias", h)
		add(p+"mlp.linear_fc1.weight", f/tpSize, h)
		add(p+"mlp.linear_fc1.bias", f/tpSize)
		add(p+"mlp.linear_fc2.weight", h, f/tpSize)
		add(p+"mlp.linear_fc2.bias", h)
	}
	if spec.PostProcess {
		add("decoder.final_layernorm.weight", h)
		add("decoder.final_layernorm.bias", h)
		if !spec.PreProcess {
			out = append(out, word)
		}
	}
	return out, nil
}

// RegisteredParameters returns the chunk's parameters in the reference's
// registration order (see ChunkParamSpecs), the order of the data-parallel
// buffers. Parameters returns them in initialisation order instead.
func (m *Model) RegisteredParameters() []*nn.Parameter {
	var out []*nn.Parameter
	if m.Spec.PreProcess {
		out = append(out, m.WordEmbeddings, m.PositionEmbeddings)
	}
	for _, l := range m.Layers {
		out = append(out, l.InputLayernormW, l.InputLayernormB)
		out = append(out, l.Proj.Parameters()...)
		out = append(out, l.QKV.Parameters()...)
		out = append(out, l.PreMLPLayernormW, l.PreMLPLayernormB)
		out = append(out, l.FC1.Parameters()...)
		out = append(out, l.FC2.Parameters()...)
	}
	if m.Spec.PostProcess {
		out = append(out, m.FinalLayernormW, m.FinalLayernormB)
		if !m.Spec.PreProcess {
			out = append(out, m.WordEmbeddings)
		}
	}
	return out
}
