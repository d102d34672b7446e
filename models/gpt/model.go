package gpt

import (
	"fmt"
	"sync/atomic"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// Model is a GPT model chunk with tied input and output embeddings, built
// from the tp layers: on a tensor-parallel group of tp ranks each rank holds
// its partitions (whole attention heads, a slice of the MLP and of the
// padded vocabulary); on one rank (a nil group) it is the serial model.
//
// A chunk holds the part of the model its Spec names (Megatron's
// pre_process, post_process and a pipeline stage's decoder layers): the
// whole model is the chunk holding everything. A chunk without the
// embedding takes its input from SetInputTensor; a chunk without the head
// returns its hidden states.
type Model struct {
	Config config.TransformerConfig
	// Spec is the part of the model this chunk holds.
	Spec ChunkSpec
	// TP is the tensor-parallel group (nil: one rank).
	TP comm.Group
	// CP are the context-parallel groups (nil: none). With cp > 1 a
	// micro-batch holds the rank's s/cp tokens of every sequence
	// (cp.Split), the position embeddings are looked up by their real
	// positions, and attention crosses the group as the config's
	// cp_comm_type says.
	CP *cp.Groups
	// CPWait, if set, accumulates the nanoseconds ring attention spends
	// blocked on receives.
	CPWait *atomic.Int64

	// Embedding is the vocab-parallel word embedding; its weight
	// (embedding.word_embeddings.weight, [V_pad/tp, h]) is also the output
	// layer's weight. A chunk holding the head but not the embedding keeps
	// its own copy of the weight (Megatron's shared embedding on the last
	// pipeline stage), equal to the first stage's: both draw it first from
	// the same stream, and finalize_model_grads sums the two gradients
	// over the embedding group. Nil on a chunk with neither.
	Embedding      *tp.VocabParallelEmbedding
	WordEmbeddings *nn.Parameter
	// PositionEmbeddings is embedding.position_embeddings.weight
	// [max_pos, h] (PreProcess only).
	PositionEmbeddings *nn.Parameter
	// Layers are the chunk's decoder layers: Layers[i] is global layer
	// Spec.LayerOffset+i.
	Layers          []*Layer
	FinalLayernormW *nn.Parameter // decoder.final_layernorm.weight [h] (PostProcess only)
	FinalLayernormB *nn.Parameter // decoder.final_layernorm.bias [h] (PostProcess only)
	// Output is the output layer: column-parallel, no bias, no weight of its
	// own (it is given the word embedding's), logits [s, b, V_pad/tp]
	// (PostProcess only).
	Output *tp.ColumnParallelLinear

	// Stats, when set, receives the activation memory at the boundaries
	// of every recorded Forward.
	Stats *ActivationStats

	// PreHook, when set, runs before each part of a forward pass — the
	// embedding, every decoder layer (or checkpointed run of layers), the
	// head — with the parameters that part uses: the place of the
	// data-parallel wrapper's forward pre-hook, which waits for the
	// parameters' all-gather under overlap_param_gather. Its error ends the
	// forward pass.
	PreHook func(ps []*nn.Parameter) error

	params []*nn.Parameter
	input  *autograd.Var
}

// ChunkSpec says which part of the GPT a model chunk holds.
type ChunkSpec struct {
	PreProcess  bool // the word and position embeddings
	PostProcess bool // the final layernorm, the output layer and the loss
	LayerOffset int  // global index of the first decoder layer
	NumLayers   int  // number of decoder layers (may be 0)
}

// WholeModel is the spec of the chunk that holds the whole model.
func WholeModel(cfg config.TransformerConfig) ChunkSpec {
	return ChunkSpec{PreProcess: true, PostProcess: true, NumLayers: cfg.NumLayers}
}

// Layer is one transformer layer (decoder.layers.{i}).
type Layer struct {
	// Number is the layer's global index (decoder.layers.{Number}).
	Number                             int
	InputLayernormW, InputLayernormB   *nn.Parameter // [h]
	QKV                                *tp.ColumnParallelLinear
	Proj                               *tp.RowParallelLinear
	PreMLPLayernormW, PreMLPLayernormB *nn.Parameter // [h]
	FC1                                *tp.ColumnParallelLinear
	FC2                                *tp.RowParallelLinear
}

// New builds a one-rank model from a validated config, initialised from g
// (NewParallel with a nil group).
func New(cfg config.TransformerConfig, g *rng.RNG) (*Model, error) {
	return NewParallel(cfg, g, nil)
}

// NewParallel builds this rank's part of the whole model on the
// tensor-parallel group tpg (NewChunk with WholeModel).
func NewParallel(cfg config.TransformerConfig, g *rng.RNG, tpg comm.Group) (*Model, error) {
	return NewChunk(cfg, g, tpg, WholeModel(cfg))
}

// NewChunk builds this rank's part of the model chunk spec on the
// tensor-parallel group tpg (nil for one rank). Initialisation walks every
// parameter of the whole model in its global order, drawing each master
// weight whole from g; the chunk keeps the parameters it holds (and each
// rank its TP partition) and passes over the others' draws
// (rng.SkipNormal), so every pipeline and TP layout starts from the weights
// the whole one-rank model has:
//
//   - word and position embeddings and every weight ~ N(0, std), except
//     linear_proj and linear_fc2 ~ N(0, std/sqrt(2·layers));
//   - the word embedding's padding rows [V, V_pad) are zero and drawn after
//     nothing: the real rows do not depend on the padding;
//   - biases 0, LayerNorm weights 1 and biases 0.
//
// The global order is the word embedding, the position embedding, then per
// layer linear_qkv, linear_proj, linear_fc1, linear_fc2 (layer norms and
// biases draw nothing), then the final layernorm.
//
// Layout (linear_qkv rows head0.q, head0.k, head0.v, head1.q, …):
// linear_qkv and linear_fc1 are column-parallel ([3h/tp, h], [ffn/tp, h]),
// linear_proj and linear_fc2 row-parallel ([h, h/tp], [h, ffn/tp]), so
// each rank holds whole heads. Under sequence parallelism the layer norms,
// the row-parallel biases and the position embedding are marked
// SequenceParallel: their gradients are partial over the TP ranks' tokens
// and finalize_model_grads sums them.
func NewChunk(cfg config.TransformerConfig, g *rng.RNG, tpg comm.Group, spec ChunkSpec) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.ShareEmbeddingsAndOutputWeights {
		return nil, fmt.Errorf("gpt: share_embeddings_and_output_weights=false (an untied output layer) is not built by gotron's GPT yet; drop --untie-embeddings-and-output-weights")
	}
	if spec.LayerOffset < 0 || spec.NumLayers < 0 || spec.LayerOffset+spec.NumLayers > cfg.NumLayers {
		return nil, fmt.Errorf("gpt: a model chunk of decoder layers [%d, %d) does not fit num_layers %d", spec.LayerOffset, spec.LayerOffset+spec.NumLayers, cfg.NumLayers)
	}
	ws := 1
	if tpg != nil {
		ws = tpg.Size()
	}
	if ws != max(cfg.TensorModelParallelSize, 1) {
		return nil, fmt.Errorf("gpt: the tensor-parallel group has %d ranks but tensor_model_parallel_size is %d", ws, cfg.TensorModelParallelSize)
	}
	sp := cfg.SequenceParallel && ws > 1
	h, f, v, vp := cfg.HiddenSize, cfg.FFN(), cfg.VocabSize, cfg.PaddedVocabSize()
	m := &Model{Config: cfg, Spec: spec, TP: tpg}
	std, outStd := cfg.InitMethodStd, cfg.OutputLayerInitStd()
	normal := func(sd float64) tp.InitMethod {
		return func(w *tensor.Tensor) { g.FillNormal(w.Data(), 0, sd) }
	}
	const_ := func(name string, val float32, n int) *nn.Parameter {
		p := m.add(nn.NewParameter(name, tensor.Full(val, n)))
		p.SequenceParallel = sp
		return p
	}
	var err error
	if spec.PreProcess || spec.PostProcess {
		m.Embedding, err = tp.NewVocabParallelEmbedding("embedding.word_embeddings", vp, h, tpg, func(w *tensor.Tensor) {
			g.FillNormal(w.Narrow(0, 0, v).Contiguous().Data(), 0, std) // rows [V, V_pad) stay zero
		}, tp.WithReduceScatterEmbeddings(sp))
		if err != nil {
			return nil, err
		}
		m.WordEmbeddings = m.add(m.Embedding.Weight)
		m.WordEmbeddings.Shared = true
	} else {
		g.SkipNormal(v * h)
	}
	if spec.PreProcess {
		pos := tensor.New(cfg.MaxPositions(), h)
		g.FillNormal(pos.Data(), 0, std)
		m.PositionEmbeddings = m.add(nn.NewParameter("embedding.position_embeddings.weight", pos))
		m.PositionEmbeddings.SequenceParallel = sp
	} else {
		g.SkipNormal(cfg.MaxPositions() * h)
	}
	g.SkipNormal(spec.LayerOffset * layerDraws(cfg))
	for i := spec.LayerOffset; i < spec.LayerOffset+spec.NumLayers; i++ {
		p := fmt.Sprintf("decoder.layers.%d.", i)
		l := &Layer{Number: i}
		l.InputLayernormW = const_(p+"input_layernorm.weight", 1, h)
		l.InputLayernormB = const_(p+"input_layernorm.bias", 0, h)
		if l.QKV, err = tp.NewColumnParallelLinear(p+"self_attention.linear_qkv", h, 3*h, tp.ColumnParallelConfig{
			Group: tpg, Init: normal(std), Bias: true, SequenceParallel: sp,
		}); err != nil {
			return nil, err
		}
		m.add(l.QKV.Parameters()...)
		if l.Proj, err = tp.NewRowParallelLinear(p+"self_attention.linear_proj", h, h, tp.RowParallelConfig{
			Group: tpg, Init: normal(outStd), Bias: true, InputIsParallel: true, SequenceParallel: sp,
		}); err != nil {
			return nil, err
		}
		m.add(l.Proj.Parameters()...)
		l.PreMLPLayernormW = const_(p+"pre_mlp_layernorm.weight", 1, h)
		l.PreMLPLayernormB = const_(p+"pre_mlp_layernorm.bias", 0, h)
		if l.FC1, err = tp.NewColumnParallelLinear(p+"mlp.linear_fc1", h, f, tp.ColumnParallelConfig{
			Group: tpg, Init: normal(std), Bias: true, SkipBiasAdd: true, SequenceParallel: sp,
		}); err != nil {
			return nil, err
		}
		m.add(l.FC1.Parameters()...)
		if l.FC2, err = tp.NewRowParallelLinear(p+"mlp.linear_fc2", f, h, tp.RowParallelConfig{
			Group: tpg, Init: normal(outStd), Bias: true, InputIsParallel: true, SequenceParallel: sp,
		}); err != nil {
			return nil, err
		}
		m.add(l.FC2.Parameters()...)
		m.Layers = append(m.Layers, l)
	}
	if !spec.PostProcess {
		return m, nil
	}
	m.FinalLayernormW = const_("decoder.final_layernorm.weight", 1, h)
	m.FinalLayernormB = const_("decoder.final_layernorm.bias", 0, h)
	if m.Output, err = tp.NewColumnParallelLinear("output_layer", h, vp, tp.ColumnParallelConfig{
		Group: tpg, SkipWeightParamAllocation: true, SequenceParallel: sp,
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// layerDraws is the number of normal deviates one decoder layer's
// initialisation draws: linear_qkv [3h, h], linear_proj [h, h],
// linear_fc1 [ffn, h] and linear_fc2 [h, ffn], each drawn whole.
func layerDraws(cfg config.TransformerConfig) int {
	h, f := cfg.HiddenSize, cfg.FFN()
	n := 0
	for _, k := range []int{3 * h * h, h * h, f * h, h * f} {
		n += 2 * ((k + 1) / 2) // FillNormal draws in pairs
	}
	return n
}

// SetInputTensor gives a chunk without the embedding its input: the hidden
// states [s, b, h] (or [s/tp, b, h] under sequence parallelism) the previous
// pipeline stage sent (Megatron's set_input_tensor). The next Forward reads
// it.
func (m *Model) SetInputTensor(x *autograd.Var) { m.input = x }

func (m *Model) add(ps ...*nn.Parameter) *nn.Parameter {
	m.params = append(m.params, ps...)
	return ps[len(ps)-1]
}

// Parameters returns every parameter of this rank in a fixed order (the
// init order).
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

// Shapes returns each parameter's name and whole (unpartitioned) shape,
// with the real, unpadded vocabulary: the shapes of the tensors WeightTensors
// and GradTensors give and LoadTensors takes.
func (m *Model) Shapes() map[string][]int {
	out := make(map[string][]int, len(m.params))
	for _, p := range m.params {
		out[p.Name] = m.fullShape(p)
	}
	return out
}

// fullShape is p's whole shape, the word embedding's without padding.
func (m *Model) fullShape(p *nn.Parameter) []int {
	s := tp.FullShape(p, m.tpSize())
	if p == m.WordEmbeddings {
		s[0] = m.Config.VocabSize
	}
	return s
}

func (m *Model) tpSize() int {
	if m.TP == nil {
		return 1
	}
	return m.TP.Size()
}

func (m *Model) tpRank() int {
	if m.TP == nil {
		return 0
	}
	return m.TP.Rank()
}

// NumParameters returns the number of scalar parameters of the whole model
// (every chunk, all TP partitions, the real vocabulary, the tied embedding
// once), whatever part this chunk holds.
func (m *Model) NumParameters() int { return NumParameters(m.Config) }

// NumParameters returns the number of scalar parameters of the whole model
// cfg describes (the real vocabulary, the tied embedding once).
func NumParameters(cfg config.TransformerConfig) int {
	n := 0
	for _, s := range ParameterShapes(cfg) {
		k := 1
		for _, d := range s {
			k *= d
		}
		n += k
	}
	return n
}

// ParameterShapes returns the name and whole shape of every parameter of
// the whole model cfg describes, with the real vocabulary: what a complete
// weight, gradient or checkpoint file holds, whatever the layout.
func ParameterShapes(cfg config.TransformerConfig) map[string][]int {
	h, f := cfg.HiddenSize, cfg.FFN()
	out := map[string][]int{
		"embedding.word_embeddings.weight":     {cfg.VocabSize, h},
		"embedding.position_embeddings.weight": {cfg.MaxPositions(), h},
		"decoder.final_layernorm.weight":       {h},
		"decoder.final_layernorm.bias":         {h},
	}
	for i := 0; i < cfg.NumLayers; i++ {
		p := fmt.Sprintf("decoder.layers.%d.", i)
		for name, s := range map[string][]int{
			"input_layernorm.weight": {h}, "input_layernorm.bias": {h},
			"self_attention.linear_qkv.weight": {3 * h, h}, "self_attention.linear_qkv.bias": {3 * h},
			"self_attention.linear_proj.weight": {h, h}, "self_attention.linear_proj.bias": {h},
			"pre_mlp_layernorm.weight": {h}, "pre_mlp_layernorm.bias": {h},
			"mlp.linear_fc1.weight": {f, h}, "mlp.linear_fc1.bias": {f},
			"mlp.linear_fc2.weight": {h, f}, "mlp.linear_fc2.bias": {h},
		} {
			out[p+name] = s
		}
	}
	return out
}
