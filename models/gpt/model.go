package gpt

import (
	"fmt"
	"math"
	"sync"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
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
	// CP are the context-parallel groups (WithContextParallel; nil:
	// none). With cp > 1 a
	// micro-batch holds the rank's s/cp tokens of every sequence
	// (cp.Split), the position embeddings are looked up by their real
	// positions, and attention crosses the group as the config's
	// cp_comm_type says.
	CP *cp.Groups
	// Experts are the expert grid's groups of the MoE layers (WithExperts;
	// zero: one rank).
	Experts moe.Parallel
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
	// [max_pos, h] (PreProcess with learned absolute positions only).
	PositionEmbeddings *nn.Parameter
	// Layers are the chunk's decoder layers: Layers[i] is global layer
	// Spec.LayerOffset+i.
	Layers          []*Layer
	FinalLayernormW *nn.Parameter // decoder.final_layernorm.weight [h] (Spec.FinalNorm only)
	FinalLayernormB *nn.Parameter // decoder.final_layernorm.bias [h] (Spec.FinalNorm with LayerNorm only)
	// Output is the output layer: column-parallel, no bias, logits
	// [s, b, V_pad/tp] (PostProcess only). Tied, it has no weight of its
	// own and is given the word embedding's; untied
	// (share_embeddings_and_output_weights false), OutputWeight is its
	// weight output_layer.weight [V_pad/tp, h].
	Output       *tp.ColumnParallelLinear
	OutputWeight *nn.Parameter
	// MTP are the multi-token-prediction depths (Spec.MTP; nil without).
	MTP []*MTPLayer

	params []*nn.Parameter
	input  *autograd.Var

	ropeMu  sync.Mutex
	rope    *kernels.RotaryTable // the last pass's table (rotary)
	ropeLen int                  // its positions; under CP its local length
	ropeIDs *kernels.RotaryTable // positions 0..n−1, for per-token position ids (rotaryOf)
}

// ChunkSpec says which part of the GPT a model chunk holds.
type ChunkSpec struct {
	PreProcess  bool // the word and position embeddings
	PostProcess bool // the output layer and the loss
	LayerOffset int  // global index of the first decoder layer
	NumLayers   int  // number of decoder layers (may be 0)
	// MTP says the chunk holds the mtp_num_layers multi-token-prediction
	// depths (all or none), and with them a copy of the word embedding.
	MTP bool
	// AfterMTP says the depths ran on an earlier chunk: in training the
	// chunk's input holds the main hidden states followed by each depth's
	// along the sequence (config.PipelineChunk.AfterMTP).
	AfterMTP bool
}

// WholeModel is the spec of the chunk that holds the whole model.
func WholeModel(cfg config.TransformerConfig) ChunkSpec {
	return ChunkSpec{PreProcess: true, PostProcess: true, NumLayers: cfg.NumLayers, MTP: cfg.MTPNumLayers > 0}
}

// SpecOf is the spec of the pipeline chunk ch (config.PipelineChunks).
func SpecOf(ch config.PipelineChunk) ChunkSpec {
	return ChunkSpec{PreProcess: ch.PreProcess, PostProcess: ch.PostProcess, LayerOffset: ch.LayerOffset, NumLayers: ch.NumLayers,
		MTP: ch.MTPLayers > 0, AfterMTP: ch.AfterMTP}
}

// finalNorm reports whether the chunk holds the decoder's final layernorm
// (config.TransformerConfig.HoldsFinalNorm).
func (s ChunkSpec) finalNorm(cfg config.TransformerConfig) bool {
	return cfg.HoldsFinalNorm(s.PostProcess, s.LayerOffset, s.NumLayers)
}

// Layer is one transformer layer (decoder.layers.{i}, or an MTP depth's
// mtp.layers.{k}.mtp_model_layer). Norm biases are nil under RMSNorm; the
// q/k norms exist only with qk_layernorm.
type Layer struct {
	// Number is the layer's global index (decoder.layers.{Number}); an MTP
	// depth k's layer is numbered num_layers + k, as the reference counts
	// it in its MoE metrics.
	Number int
	// Prefix is the layer's parameter names' prefix, ending in a dot.
	Prefix                           string
	InputLayernormW, InputLayernormB *nn.Parameter // [h]
	// QKV is linear_qkv [(n + 2g)·d/tp, h]: per key/value group its query
	// heads, then its key and value head (nn.QKVLayout).
	QKV                      *tp.ColumnParallelLinear
	QLayernormW, QLayernormB *nn.Parameter // self_attention.q_layernorm [d]
	KLayernormW, KLayernormB *nn.Parameter // self_attention.k_layernorm [d]
	// MLA replaces QKV and the q/k norms under multi_latent_attention.
	MLA *MLA
	// Proj is linear_proj [h, n·d/tp] (n·v_head_dim/tp under MLA).
	Proj                               *tp.RowParallelLinear
	PreMLPLayernormW, PreMLPLayernormB *nn.Parameter // [h]
	// FC1 is linear_fc1 [ffn/tp, h], or for a gated linear unit
	// [2·ffn/tp, h]: the rank's gate rows, then its up rows (stride 2).
	FC1 *tp.ColumnParallelLinear
	FC2 *tp.RowParallelLinear
	// MoE replaces FC1 and FC2 in the layers moe_layer_freq selects (nil
	// in a dense layer).
	MoE *moe.Layer
}

// New builds a one-rank model from a validated config, initialised from g
// (NewParallel with a nil group).
func New(cfg config.TransformerConfig, g *rng.RNG) (*Model, error) {
	return NewParallel(cfg, g, nil)
}

// NewParallel builds this rank's part of the whole model on the
// tensor-parallel group tpg (NewChunk with WholeModel).
func NewParallel(cfg config.TransformerConfig, g *rng.RNG, tpg comm.Group, opts ...Option) (*Model, error) {
	return NewChunk(cfg, g, tpg, WholeModel(cfg), opts...)
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
//   - the word embedding's (and an untied output layer's) padding rows
//     [V, V_pad) are zero and drawn after nothing: the real rows do not
//     depend on the padding;
//   - biases 0, norm weights 1 (0 when zero-centred) and biases 0.
//
// The global order is the word embedding, the position embedding (learned
// absolute positions only), then per layer linear_qkv, linear_proj,
// linear_fc1, linear_fc2 (norms and biases draw nothing), then an untied
// output layer.
//
// Layout: linear_qkv and linear_fc1 are column-parallel
// ([(n + 2g)·d/tp, h], [ffn/tp, h] or gated [2·ffn/tp, h] with stride 2),
// linear_proj and linear_fc2 row-parallel ([h, n·d/tp], [h, ffn/tp]), so
// each rank holds whole key/value groups and their query heads. Under
// sequence parallelism the norms, the row-parallel biases and the position
// embedding are marked SequenceParallel: their gradients are partial over
// the TP ranks' tokens and finalize_model_grads sums them; the q/k norms'
// gradients are partial over the ranks' heads and always summed
// (SumGradientsAcrossTP).
func NewChunk(cfg config.TransformerConfig, g *rng.RNG, tpg comm.Group, spec ChunkSpec, opts ...Option) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if spec.LayerOffset < 0 || spec.NumLayers < 0 || spec.LayerOffset+spec.NumLayers > cfg.NumLayers {
		return nil, fmt.Errorf("gpt: a model chunk of decoder layers [%d, %d) does not fit num_layers %d", spec.LayerOffset, spec.LayerOffset+spec.NumLayers, cfg.NumLayers)
	}
	if (spec.MTP || spec.AfterMTP) && cfg.MTPNumLayers == 0 || spec.MTP && spec.AfterMTP {
		return nil, fmt.Errorf("gpt: a model chunk with mtp %v and after_mtp %v for mtp_num_layers %d: the depths need mtp_num_layers > 0 and sit on one chunk", spec.MTP, spec.AfterMTP, cfg.MTPNumLayers)
	}
	ws := 1
	if tpg != nil {
		ws = tpg.Size()
	}
	if ws != max(cfg.TensorModelParallelSize, 1) {
		return nil, fmt.Errorf("gpt: the tensor-parallel group has %d ranks but tensor_model_parallel_size is %d", ws, cfg.TensorModelParallelSize)
	}
	b := &builder{cfg: cfg, g: g, tpg: tpg, sp: cfg.SequenceParallel && ws > 1, init: cfg.PerformInitialization,
		unfused: !cfg.GradientAccumulationFusion}
	for _, o := range opts {
		o(b)
	}
	m := &Model{Config: cfg, Spec: spec, TP: tpg, CP: b.cp, Experts: b.experts}
	b.m = m
	h, v, vp := cfg.HiddenSize, cfg.VocabSize, cfg.PaddedVocabSize()
	var err error
	if config.HoldsWordEmbedding(spec.PreProcess, spec.PostProcess, spec.MTP, cfg.ShareEmbeddingsAndOutputWeights) {
		m.Embedding, err = tp.NewVocabParallelEmbedding("embedding.word_embeddings", vp, h, tpg, b.vocabInit(), tp.WithReduceScatterEmbeddings(b.sp))
		if err != nil {
			return nil, err
		}
		m.WordEmbeddings = m.add(m.Embedding.Weight)
		// A chunk without the embedding holds the weight as the tied
		// output layer's, or the MTP depths', a copy of the first chunk's.
		m.WordEmbeddings.Shared = !spec.PreProcess
	} else {
		b.skip(v * h)
	}
	if cfg.LearnedPositions() {
		if spec.PreProcess {
			pos := tensor.New(cfg.MaxPositions(), h)
			b.draw(pos.Data(), pos.Dim(0), pos.Dim(1), cfg.InitMethodStd)
			m.PositionEmbeddings = m.add(nn.NewParameter("embedding.position_embeddings.weight", pos))
			m.PositionEmbeddings.SequenceParallel = b.sp
		} else {
			b.skip(cfg.MaxPositions() * h)
		}
	}
	for i := 0; i < spec.LayerOffset; i++ {
		b.skip(layerDraws(cfg, i))
	}
	for i := spec.LayerOffset; i < spec.LayerOffset+spec.NumLayers; i++ {
		l, err := b.layer(i)
		if err != nil {
			return nil, err
		}
		m.Layers = append(m.Layers, l)
	}
	if spec.finalNorm(cfg) {
		m.FinalLayernormW, m.FinalLayernormB = b.norm("decoder.final_layernorm")
	}
	if !spec.PostProcess && !spec.MTP {
		return m, nil
	}
	if err := b.mtp(spec); err != nil {
		return nil, err
	}
	if !spec.PostProcess {
		return m, nil
	}
	oc := tp.ColumnParallelConfig{Group: tpg, SkipWeightParamAllocation: true, SequenceParallel: b.sp, UnfusedWeightGrad: b.unfused}
	if !cfg.ShareEmbeddingsAndOutputWeights {
		oc.SkipWeightParamAllocation, oc.Init = false, b.vocabInit()
	}
	if m.Output, err = tp.NewColumnParallelLinear("output_layer", h, vp, oc); err != nil {
		return nil, err
	}
	if !cfg.ShareEmbeddingsAndOutputWeights {
		m.OutputWeight = m.add(m.Output.Weight)
	}
	return m, nil
}

// builder holds what NewChunk's parts share.
type builder struct {
	cfg     config.TransformerConfig
	g       *rng.RNG
	tpg     comm.Group
	sp      bool
	m       *Model
	experts moe.Parallel // the expert grid's groups (WithExperts)
	init    bool         // cfg.PerformInitialization: draw the weights
	cp      *cp.Groups   // WithContextParallel
	// unfused is !cfg.GradientAccumulationFusion: every linear layer's
	// weight gradient is computed apart from its accumulation.
	unfused bool
}

// normal is the init method N(0, sd) drawing from the model's stream.
func (b *builder) initMethod(sd float64) tp.InitMethod {
	return func(w *tensor.Tensor) { b.draw(w.Data(), w.Dim(0), w.Dim(1), sd) }
}

// draw fills w, a weight of rows × cols (its fan-out and fan-in), from
// N(0, sd), or under init_method_xavier_uniform from U(−a, a), a =
// sqrt(6/(rows + cols)). The uniform values are a·erf(z/√2) of the same
// normal draws z (2Φ(z) − 1 is uniform on (−1, 1)), so both take the
// same draws from the stream and skip skips either. Without
// perform_initialization it draws nothing and w stays zero (a checkpoint
// will fill it).
func (b *builder) draw(w []float32, rows, cols int, sd float64) {
	if !b.init {
		return
	}
	if !b.cfg.InitMethodXavierUniform {
		b.g.FillNormal(w, 0, sd)
		return
	}
	b.g.FillNormal(w, 0, 1)
	a := math.Sqrt(6 / float64(rows+cols))
	for i, z := range w {
		w[i] = float32(a * math.Erf(float64(z)/math.Sqrt2))
	}
}

// skip advances the stream past n draws made for weights another rank or
// chunk holds (nothing without perform_initialization).
func (b *builder) skip(n int) {
	if b.init {
		b.g.SkipNormal(n)
	}
}

// vocabInit draws a vocabulary-sized weight [V_pad, h]: rows [0, V) from
// N(0, std), the padding rows [V, V_pad) zero and drawn after nothing.
func (b *builder) vocabInit() tp.InitMethod {
	return func(w *tensor.Tensor) {
		// Xavier's fan-out is the real vocabulary, not the padded one
		// (which depends on the TP size), so that every layout draws the
		// same table.
		b.draw(w.Narrow(0, 0, b.cfg.VocabSize).Contiguous().Data(), b.cfg.VocabSize, w.Dim(1), b.cfg.InitMethodStd)
	}
}

// norm adds the weight and (for LayerNorm) bias of the norm named prefix
// over the hidden size: weight 1 (0 when stored zero-centred), bias 0,
// marked sequence-parallel under SP.
func (b *builder) norm(prefix string) (w, bias *nn.Parameter) {
	return b.normOf(prefix, b.cfg.HiddenSize)
}

// normOf is norm over h channels.
func (b *builder) normOf(prefix string, h int) (w, bias *nn.Parameter) {
	w = b.constant(prefix+".weight", b.normOne(), h)
	w.SequenceParallel = b.sp
	if !b.cfg.RMSNorm() {
		bias = b.constant(prefix+".bias", 0, h)
		bias.SequenceParallel = b.sp
	}
	return w, bias
}

// normOne is a norm weight's initial value: 1, or 0 when zero-centred.
func (b *builder) normOne() float32 {
	if b.cfg.LayernormZeroCenteredGamma {
		return 0
	}
	return 1
}

func (b *builder) constant(name string, val float32, n int) *nn.Parameter {
	return b.m.add(nn.NewParameter(name, tensor.Full(val, n)))
}

// qkNorm adds a per-head norm [d] of queries or keys: every rank applies
// it to its own heads, so its gradient is summed over TP.
func (b *builder) qkNorm(prefix string) (w, bias *nn.Parameter) {
	d := b.cfg.HeadDim()
	w = b.constant(prefix+".weight", b.normOne(), d)
	w.SumGradientsAcrossTP = true
	if !b.cfg.RMSNorm() {
		bias = b.constant(prefix+".bias", 0, d)
		bias.SumGradientsAcrossTP = true
	}
	return w, bias
}

// layer builds decoder layer i, drawing linear_qkv, linear_proj,
// linear_fc1 and linear_fc2 in that order.
func (b *builder) layer(i int) (*Layer, error) {
	return b.layerAt(fmt.Sprintf("decoder.layers.%d.", i), i, b.cfg.IsMoELayer(i))
}

// attentionInputs builds the layer's projections before the attention
// core: linear_qkv and its q/k norms, or multi-latent attention's (MLA).
func (b *builder) attentionInputs(l *Layer, p string) error {
	cfg := b.cfg
	var err error
	if cfg.MultiLatentAttention {
		l.MLA, err = b.mla(p + "self_attention.")
		return err
	}
	if l.QKV, err = tp.NewColumnParallelLinear(p+"self_attention.linear_qkv", cfg.HiddenSize, cfg.QKVWidth(), tp.ColumnParallelConfig{
		Group: b.tpg, Init: b.initMethod(cfg.InitMethodStd), Bias: cfg.QKVBias(), SequenceParallel: b.sp, UnfusedWeightGrad: b.unfused,
	}); err != nil {
		return err
	}
	b.m.add(l.QKV.Parameters()...)
	if cfg.QKLayernorm {
		l.QLayernormW, l.QLayernormB = b.qkNorm(p + "self_attention.q_layernorm")
		l.KLayernormW, l.KLayernormB = b.qkNorm(p + "self_attention.k_layernorm")
	}
	return nil
}

// layerAt builds the transformer layer with prefix p and number i, a MoE
// layer when moeLayer (decoder layer i, or an MTP depth's inner layer).
func (b *builder) layerAt(p string, i int, moeLayer bool) (*Layer, error) {
	cfg, tpg, sp, m := b.cfg, b.tpg, b.sp, b.m
	h, std, outStd := cfg.HiddenSize, cfg.InitMethodStd, cfg.OutputLayerInitStd()
	l := &Layer{Number: i, Prefix: p}
	var err error
	l.InputLayernormW, l.InputLayernormB = b.norm(p + "input_layernorm")
	if err := b.attentionInputs(l, p); err != nil {
		return nil, err
	}
	if l.Proj, err = tp.NewRowParallelLinear(p+"self_attention.linear_proj", cfg.AttentionWidth(), h, tp.RowParallelConfig{
		Group: tpg, Init: b.initMethod(outStd), Bias: cfg.AddBiasLinear, InputIsParallel: true, SequenceParallel: sp, UnfusedWeightGrad: b.unfused,
	}); err != nil {
		return nil, err
	}
	m.add(l.Proj.Parameters()...)
	l.PreMLPLayernormW, l.PreMLPLayernormB = b.norm(p + "pre_mlp_layernorm")
	if moeLayer {
		l.MoE, err = b.moeLayer(p)
		return l, err
	}
	stride := 1
	if cfg.GatedLinearUnit {
		stride = 2 // each rank holds its gate rows and its up rows
	}
	if l.FC1, err = tp.NewColumnParallelLinear(p+"mlp.linear_fc1", h, cfg.FC1Width(), tp.ColumnParallelConfig{
		Group: tpg, Init: b.initMethod(std), Bias: cfg.AddBiasLinear, SkipBiasAdd: true, SequenceParallel: sp, Stride: stride,
		UnfusedWeightGrad: b.unfused,
	}); err != nil {
		return nil, err
	}
	m.add(l.FC1.Parameters()...)
	if l.FC2, err = tp.NewRowParallelLinear(p+"mlp.linear_fc2", cfg.FFN(), h, tp.RowParallelConfig{
		Group: tpg, Init: b.initMethod(outStd), Bias: cfg.AddBiasLinear, InputIsParallel: true, SequenceParallel: sp, UnfusedWeightGrad: b.unfused,
	}); err != nil {
		return nil, err
	}
	m.add(l.FC2.Parameters()...)
	return l, nil
}

// layerDraws is the number of normal deviates decoder layer i's
// initialisation draws: linear_qkv [(n + 2g)·d, h], linear_proj [h, n·d],
// then linear_fc1 [ffn (·2 gated), h] and linear_fc2 [h, ffn], or in a MoE
// layer the router [E, h], each expert's fc1 and fc2 and the shared
// experts' (moeDraws), each drawn whole.
func layerDraws(cfg config.TransformerConfig, i int) int {
	return layerDrawsOf(cfg, cfg.IsMoELayer(i))
}

// layerDrawsOf is layerDraws of a layer that is a MoE layer or not.
func layerDrawsOf(cfg config.TransformerConfig, moeLayer bool) int {
	h := cfg.HiddenSize
	sizes := []int{cfg.QKVWidth() * h, h * cfg.AttentionWidth()}
	if cfg.MultiLatentAttention {
		sizes = append(mlaDraws(cfg), h*cfg.AttentionWidth())
	}
	if moeLayer {
		sizes = append(sizes, moeDraws(cfg)...)
	} else {
		sizes = append(sizes, cfg.FC1Width()*h, h*cfg.FFN())
	}
	n := 0
	for _, k := range sizes {
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
	ws, _ := m.partitionSize(p)
	s := tp.FullShape(p, ws)
	if p == m.WordEmbeddings || p == m.OutputWeight {
		s[0] = m.Config.VocabSize
	}
	return s
}

// Partition says how p's local tensor is cut from the whole tensor on
// this rank, as a checkpoint describes it: along PartitionDim with its
// stride over p's partition group (the tensor-parallel group, or an
// expert's weights' expert tensor-parallel group), or, for a parameter
// the group replicates, Dim −1 with this rank's place in the group (its
// rank 0 writes the copy).
func (m *Model) Partition(p *nn.Parameter) ckpt.Partition {
	size, rank := m.partitionSize(p)
	if !p.Partitioned() {
		return ckpt.Partition{Dim: -1, Rank: rank}
	}
	return ckpt.Partition{Dim: p.PartitionDim, Stride: max(p.PartitionStride, 1), Size: size, Rank: rank}
}

// partitionGroup is the group p is split over: the expert tensor-parallel
// group for an expert's weight, else the tensor-parallel group.
func (m *Model) partitionGroup(p *nn.Parameter) comm.Group {
	if !p.Allreduce {
		return m.Experts.ETP
	}
	return m.TP
}

// partitionSize is the size of p's partition group and this rank's place
// in it.
func (m *Model) partitionSize(p *nn.Parameter) (size, rank int) {
	g := m.partitionGroup(p)
	return moe.GroupSize(g), moe.GroupRank(g)
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
	out := map[string][]int{}
	for _, p := range paramList(cfg, 1, WholeModel(cfg), false) {
		out[p.Name] = p.Shape
	}
	return out
}
