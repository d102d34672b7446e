package gpt

import (
	"fmt"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// Model is a GPT with tied input and output embeddings.
type Model struct {
	Config config.TransformerConfig

	WordEmbeddings     *nn.Parameter // embedding.word_embeddings.weight [V, h]
	PositionEmbeddings *nn.Parameter // embedding.position_embeddings.weight [max_pos, h]
	Layers             []*Layer
	FinalLayernormW    *nn.Parameter // decoder.final_layernorm.weight [h]
	FinalLayernormB    *nn.Parameter // decoder.final_layernorm.bias [h]

	params []*nn.Parameter
}

// Layer is one transformer layer (decoder.layers.{i}).
type Layer struct {
	InputLayernormW, InputLayernormB   *nn.Parameter // [h]
	QKVWeight, QKVBias                 *nn.Parameter // [3h, h], [3h]: rows head0.q, head0.k, head0.v, head1.q, ...
	ProjWeight, ProjBias               *nn.Parameter // [h, h], [h]
	PreMLPLayernormW, PreMLPLayernormB *nn.Parameter // [h]
	FC1Weight, FC1Bias                 *nn.Parameter // [ffn, h], [ffn]
	FC2Weight, FC2Bias                 *nn.Parameter // [h, ffn], [h]
}

// New builds a model from a validated config, initialised from g:
// weights and both embeddings ~ N(0, std), linear_proj and linear_fc2
// weights ~ N(0, std/sqrt(2·layers)), biases 0, LayerNorm weights 1 and
// biases 0. Parameters are drawn in Parameters() order.
func New(cfg config.TransformerConfig, g *rng.RNG) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.ShareEmbeddingsAndOutputWeights {
		return nil, fmt.Errorf("gpt: share_embeddings_and_output_weights=false (an untied output layer) is not built by gotron's GPT yet; drop --untie-embeddings-and-output-weights")
	}
	h, f, v := cfg.HiddenSize, cfg.FFN(), cfg.VocabSize
	m := &Model{Config: cfg}
	std, outStd := cfg.InitMethodStd, cfg.OutputLayerInitStd()
	normal := func(name string, sd float64, shape ...int) *nn.Parameter {
		t := tensor.New(shape...)
		g.FillNormal(t.Data(), 0, sd)
		return m.add(name, t)
	}
	const_ := func(name string, v float32, shape ...int) *nn.Parameter {
		return m.add(name, tensor.Full(v, shape...))
	}
	m.WordEmbeddings = normal("embedding.word_embeddings.weight", std, v, h)
	m.WordEmbeddings.Shared = true
	m.PositionEmbeddings = normal("embedding.position_embeddings.weight", std, cfg.MaxPositions(), h)
	for i := 0; i < cfg.NumLayers; i++ {
		p := fmt.Sprintf("decoder.layers.%d.", i)
		l := &Layer{}
		l.InputLayernormW = const_(p+"input_layernorm.weight", 1, h)
		l.InputLayernormB = const_(p+"input_layernorm.bias", 0, h)
		l.QKVWeight = normal(p+"self_attention.linear_qkv.weight", std, 3*h, h)
		l.QKVBias = const_(p+"self_attention.linear_qkv.bias", 0, 3*h)
		l.ProjWeight = normal(p+"self_attention.linear_proj.weight", outStd, h, h)
		l.ProjBias = const_(p+"self_attention.linear_proj.bias", 0, h)
		l.PreMLPLayernormW = const_(p+"pre_mlp_layernorm.weight", 1, h)
		l.PreMLPLayernormB = const_(p+"pre_mlp_layernorm.bias", 0, h)
		l.FC1Weight = normal(p+"mlp.linear_fc1.weight", std, f, h)
		l.FC1Bias = const_(p+"mlp.linear_fc1.bias", 0, f)
		l.FC2Weight = normal(p+"mlp.linear_fc2.weight", outStd, h, f)
		l.FC2Bias = const_(p+"mlp.linear_fc2.bias", 0, h)
		m.Layers = append(m.Layers, l)
	}
	m.FinalLayernormW = const_("decoder.final_layernorm.weight", 1, h)
	m.FinalLayernormB = const_("decoder.final_layernorm.bias", 0, h)
	return m, nil
}

func (m *Model) add(name string, t *tensor.Tensor) *nn.Parameter {
	p := nn.NewParameter(name, t)
	m.params = append(m.params, p)
	return p
}

// Parameters returns every parameter in a fixed order (the init order).
func (m *Model) Parameters() []*nn.Parameter { return m.params }

// Parameter returns the parameter with Megatron's name, or nil.
func (m *Model) Parameter(name string) *nn.Parameter {
	for _, p := range m.params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Shapes returns each parameter's name and shape.
func (m *Model) Shapes() map[string][]int {
	out := make(map[string][]int, len(m.params))
	for _, p := range m.params {
		out[p.Name] = append([]int(nil), p.Value.Shape()...)
	}
	return out
}

// NumParameters returns the number of scalar parameters.
func (m *Model) NumParameters() int {
	n := 0
	for _, p := range m.params {
		n += p.Value.Len()
	}
	return n
}
