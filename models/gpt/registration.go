package gpt

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// LayerOfParam returns the decoder layer a parameter named as
// ChunkParamSpecs names it belongs to ("decoder.layers.<i>.…"), and
// whether it belongs to one.
func LayerOfParam(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "decoder.layers.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	return i, err == nil && i >= 0
}

// FSDPGroups groups a chunk's parameters (ChunkParamSpecs, registration
// order) as Megatron-FSDP's wrapper (dp.FSDP) lays them out: a unit per
// decoder layer (FSDPUnits), in layer order, then the word embedding tied
// across pipeline stages alone, then the other parameters (the
// embeddings, the final norm, an untied output layer); each group in
// registration order. units is the number of units.
func FSDPGroups(specs []ParamSpec) (groups [][]ParamSpec, units int) {
	var layers []int
	byLayer := map[int][]ParamSpec{}
	var shared, rest []ParamSpec
	for _, s := range specs {
		switch i, ok := LayerOfParam(s.Name); {
		case ok:
			if _, seen := byLayer[i]; !seen {
				layers = append(layers, i)
			}
			byLayer[i] = append(byLayer[i], s)
		case s.SharedEmbedding:
			shared = append(shared, s)
		default:
			rest = append(rest, s)
		}
	}
	slices.Sort(layers)
	for _, i := range layers {
		groups = append(groups, byLayer[i])
	}
	for _, g := range [][]ParamSpec{shared, rest} {
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	return groups, len(layers)
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
// (docs/SEMANTICS.md § DDP buffers and buckets): the word and position
// embeddings on the first stage, then per layer input_layernorm, linear_proj,
// linear_qkv, pre_mlp_layernorm, linear_fc1, linear_fc2 (weight before bias),
// then the final layernorm and, on a last stage without the embedding, the
// output layer's copy of the tied word embedding. It allocates nothing, so
// inspection tools can lay out models of any size; RegisteredParameters gives
// a built chunk's parameters in the same order.
func ChunkParamSpecs(cfg config.TransformerConfig, tpSize int, spec ChunkSpec) ([]ParamSpec, error) {
	if tpSize < 1 || cfg.NumAttentionHeads%tpSize != 0 || cfg.QueryGroups()%tpSize != 0 || cfg.FFN()%tpSize != 0 {
		return nil, fmt.Errorf("gpt: %d attention heads in %d groups and ffn_hidden_size %d do not divide over %d tensor-parallel ranks", cfg.NumAttentionHeads, cfg.QueryGroups(), cfg.FFN(), tpSize)
	}
	return paramList(cfg, tpSize, spec, true), nil
}

// paramList lists a chunk's parameters with the shapes of one of tpSize
// tensor-parallel ranks, in registration order; whole lists the whole
// model's tensors instead (real vocabulary, a tied embedding once).
func paramList(cfg config.TransformerConfig, tpSize int, spec ChunkSpec, registered bool) []ParamSpec {
	h := cfg.HiddenSize
	v := cfg.VocabSize
	if registered {
		v = cfg.PaddedVocabSize() / tpSize
	}
	tied := cfg.ShareEmbeddingsAndOutputWeights
	var out []ParamSpec
	add := func(name string, shape ...int) { out = append(out, ParamSpec{Name: name, Shape: shape}) }
	norm := func(name string, n int) {
		add(name+".weight", n)
		if !cfg.RMSNorm() {
			add(name+".bias", n)
		}
	}
	word := ParamSpec{Name: "embedding.word_embeddings.weight", Shape: []int{v, h},
		SharedEmbedding: registered && cfg.WordEmbeddingShared()}
	if spec.PreProcess || spec.MTP && registered {
		// (the MTP depths' copy registers first, as the reference's
		// embedding on an MTP stage)
		out = append(out, word)
	}
	if spec.PreProcess {
		if cfg.LearnedPositions() {
			add("embedding.position_embeddings.weight", cfg.MaxPositions(), h)
		}
	}
	for i := spec.LayerOffset; i < spec.LayerOffset+spec.NumLayers; i++ {
		layerParams(cfg, tpSize, fmt.Sprintf("decoder.layers.%d.", i), cfg.IsMoELayer(i), add, norm)
	}
	if spec.finalNorm(cfg) {
		norm("decoder.final_layernorm", h)
	}
	if spec.MTP {
		for k := range cfg.MTPNumLayers {
			p := mtpPrefix(k)
			norm(p+"enorm", h)
			norm(p+"hnorm", h)
			add(p+"eh_proj.weight", h/tpSize, 2*h)
			layerParams(cfg, tpSize, p+"mtp_model_layer.", mtpIsMoE(cfg), add, norm)
			norm(p+"final_layernorm", h)
		}
	}
	if spec.PostProcess {
		switch {
		case !tied:
			add("output_layer.weight", v, h)
		case registered && !spec.PreProcess && !spec.MTP:
			out = append(out, word)
		}
	}
	return out
}

// layerParams lists the parameters of the transformer layer with prefix p
// (a MoE layer when moeLayer) as paramList does, through its add and norm.
func layerParams(cfg config.TransformerConfig, tpSize int, p string, moeLayer bool, add func(string, ...int), norm func(string, int)) {
	h, f := cfg.HiddenSize, cfg.FFN()
	norm(p+"input_layernorm", h)
	add(p+"self_attention.linear_proj.weight", h, cfg.AttentionWidth()/tpSize)
	if cfg.AddBiasLinear {
		add(p+"self_attention.linear_proj.bias", h)
	}
	switch {
	case cfg.MultiLatentAttention:
		mlaParams(cfg, tpSize, p+"self_attention.", add, norm)
	default:
		add(p+"self_attention.linear_qkv.weight", cfg.QKVWidth()/tpSize, h)
		if cfg.QKVBias() {
			add(p+"self_attention.linear_qkv.bias", cfg.QKVWidth()/tpSize)
		}
		if cfg.QKLayernorm {
			norm(p+"self_attention.q_layernorm", cfg.HeadDim())
			norm(p+"self_attention.k_layernorm", cfg.HeadDim())
		}
	}
	norm(p+"pre_mlp_layernorm", h)
	if moeLayer {
		f1, f, fs1, fs := moeWidths(cfg)
		add(p+"mlp.router.weight", cfg.NumMoEExperts, h)
		if cfg.AddBiasLinear {
			add(p+"mlp.router.bias", cfg.NumMoEExperts)
		}
		for j := range cfg.NumMoEExperts {
			q := fmt.Sprintf("%smlp.experts.local_experts.%d.", p, j)
			add(q+"linear_fc1.weight", f1, h)
			if cfg.AddBiasLinear {
				add(q+"linear_fc1.bias", f1)
			}
			add(q+"linear_fc2.weight", h, f)
			if cfg.AddBiasLinear {
				add(q+"linear_fc2.bias", h)
			}
		}
		if fs > 0 {
			add(p+"mlp.shared_experts.linear_fc1.weight", fs1/tpSize, h)
			if cfg.AddBiasLinear {
				add(p+"mlp.shared_experts.linear_fc1.bias", fs1/tpSize)
			}
			add(p+"mlp.shared_experts.linear_fc2.weight", h, fs/tpSize)
			if cfg.AddBiasLinear {
				add(p+"mlp.shared_experts.linear_fc2.bias", h)
			}
		}
		return
	}
	add(p+"mlp.linear_fc1.weight", cfg.FC1Width()/tpSize, h)
	if cfg.AddBiasLinear {
		add(p+"mlp.linear_fc1.bias", cfg.FC1Width()/tpSize)
	}
	add(p+"mlp.linear_fc2.weight", h, f/tpSize)
	if cfg.AddBiasLinear {
		add(p+"mlp.linear_fc2.bias", h)
	}
}

// RegisteredParameters returns the chunk's parameters in the reference's
// registration order (see ChunkParamSpecs), the order of the data-parallel
// buffers. Parameters returns them in initialisation order instead.
func (m *Model) RegisteredParameters() []*nn.Parameter {
	var out []*nn.Parameter
	add := func(ps ...*nn.Parameter) {
		for _, p := range ps {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	if m.Spec.PreProcess || m.Spec.MTP {
		add(m.WordEmbeddings, m.PositionEmbeddings)
	}
	for _, l := range m.Layers {
		add(l.registered()...)
	}
	add(m.FinalLayernormW, m.FinalLayernormB)
	for _, l := range m.MTP {
		add(l.EnormW, l.EnormB, l.HnormW, l.HnormB)
		add(l.EHProj.Parameters()...)
		add(l.Layer.registered()...)
		add(l.FinalLayernormW, l.FinalLayernormB)
	}
	if m.Spec.PostProcess {
		add(m.OutputWeight)
		if !m.Spec.PreProcess && !m.Spec.MTP {
			add(m.WordEmbeddings)
		}
	}
	return out
}

// registered returns the layer's parameters in registration order (see
// ChunkParamSpecs).
func (l *Layer) registered() []*nn.Parameter {
	ps := nonNil(l.InputLayernormW, l.InputLayernormB)
	ps = append(ps, l.Proj.Parameters()...)
	if l.MLA != nil {
		ps = append(ps, l.MLA.parameters()...)
	} else {
		ps = append(ps, l.QKV.Parameters()...)
	}
	ps = append(ps, nonNil(l.QLayernormW, l.QLayernormB, l.KLayernormW, l.KLayernormB, l.PreMLPLayernormW, l.PreMLPLayernormB)...)
	if l.MoE != nil {
		return append(ps, l.MoE.Parameters()...)
	}
	ps = append(ps, l.FC1.Parameters()...)
	return append(ps, l.FC2.Parameters()...)
}

// mlaParams lists an MLA layer's projections and norms as layerParams
// does, in the reference's registration order.
func mlaParams(cfg config.TransformerConfig, tpSize int, p string, add func(string, ...int), norm func(string, int)) {
	a, h, n := cfg.MLA, cfg.HiddenSize, cfg.NumAttentionHeads
	qd := a.MLAQHeadDim()
	if a.QLoRARank > 0 {
		add(p+"linear_q_down_proj.weight", a.QLoRARank/tpSize, h)
		add(p+"linear_q_up_proj.weight", n*qd/tpSize, a.QLoRARank)
	} else {
		add(p+"linear_q_proj.weight", n*qd/tpSize, h)
	}
	add(p+"linear_kv_down_proj.weight", (a.KVLoRARank+a.QKPosEmbHeadDim)/tpSize, h)
	add(p+"linear_kv_up_proj.weight", n*(a.QKHeadDim+a.VHeadDim)/tpSize, a.KVLoRARank)
	if cfg.QKLayernorm {
		if a.QLoRARank > 0 {
			norm(p+"q_layernorm", a.QLoRARank)
		}
		norm(p+"kv_layernorm", a.KVLoRARank)
	}
}
