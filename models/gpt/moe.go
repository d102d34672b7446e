package gpt

import (
	"fmt"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tp"
)

// moeWidths are a MoE layer's widths: each expert's fc1 output f₁ (2f
// gated) and fc2 input f, and the shared experts' (fs₁, fs; 0 without).
func moeWidths(cfg config.TransformerConfig) (f1, f, fs1, fs int) {
	f, fs = cfg.MoEFFN(), cfg.MoESharedExpertIntermediateSize
	f1, fs1 = f, fs
	if cfg.GatedLinearUnit {
		f1, fs1 = 2*f, 2*fs
	}
	return f1, f, fs1, fs
}

// moeDraws are the sizes a MoE layer draws after its attention: the router
// [E, h] and, with add_bias_linear, its bias [E] (drawn as the reference's
// router draws it, from the init method; every other bias is zero), then
// per expert linear_fc1 [f₁, h] and linear_fc2 [h, f], then the shared
// experts' fc1 and fc2.
func moeDraws(cfg config.TransformerConfig) []int {
	h := cfg.HiddenSize
	f1, f, fs1, fs := moeWidths(cfg)
	out := []int{cfg.NumMoEExperts * h}
	if cfg.AddBiasLinear {
		out = append(out, cfg.NumMoEExperts)
	}
	for range cfg.NumMoEExperts {
		out = append(out, f1*h, h*f)
	}
	if fs > 0 {
		out = append(out, fs1*h, h*fs)
	}
	return out
}

// Option configures NewChunk.
type Option func(*builder)

// WithExperts gives NewChunk the expert grid's groups for its MoE layers
// (moe.Parallel without the dispatcher, which the config names): each rank
// builds only its expert-parallel rank's local experts, each split over
// the expert tensor-parallel group. Without it a MoE model needs one
// rank per expert-grid dimension.
func WithExperts(p moe.Parallel) Option { return func(b *builder) { b.experts = p } }

// WithContextParallel makes the model a context-parallel one over g (nil:
// none): see Model.CP.
func WithContextParallel(g *cp.Groups) Option { return func(b *builder) { b.cp = g } }

// moeSupported reports what gotron's MoE layer does not do yet, and a
// parallel layout whose groups NewChunk was not given.
func (b *builder) moeSupported() error {
	cfg, p := b.cfg, b.experts
	ep, etp := max(cfg.ExpertModelParallelSize, 1), cfg.EffectiveExpertTensorParallelSize()
	tpcp := max(cfg.TensorModelParallelSize, 1) * max(cfg.ContextParallelSize, 1)
	switch {
	case cfg.NumMoEExperts == 0:
		return nil
	case moe.GroupSize(p.EP) != ep || moe.GroupSize(p.ETP) != max(etp, 1) || moe.GroupSize(p.TPEP) != ep*max(etp, 1) || moe.GroupSize(p.TPCP) != tpcp:
		return fmt.Errorf("gpt: the MoE layers were given groups of ep %d, expt-tp %d, tp-ep %d and tp-cp %d ranks, but the config says expert_model_parallel_size %d, expert_tensor_parallel_size %d and tp·cp %d: build the model with gpt.WithExperts and the expert grid's groups",
			moe.GroupSize(p.EP), moe.GroupSize(p.ETP), moe.GroupSize(p.TPEP), moe.GroupSize(p.TPCP), ep, etp, tpcp)
	}
	return MoEBuilt(cfg)
}

// MoEBuilt reports what of cfg's MoE settings gotron's MoE layer does
// not do yet (nil for a dense model): the builder refuses them, and
// train's validation (and so gotron plan) refuses them up front with the
// same words.
func MoEBuilt(cfg config.TransformerConfig) error {
	switch {
	case cfg.NumMoEExperts == 0:
		return nil
	case cfg.CalculatePerTokenLoss:
		return fmt.Errorf("gpt: the MoE auxiliary losses under --calculate-per-token-loss are not built yet: drop it for a MoE model")
	case cfg.RecomputeGranularity == "full":
		return fmt.Errorf("gpt: full recompute of MoE layers is not built yet (its replay would count the routed tokens twice): use --recompute-granularity selective")
	}
	return nil
}

// moeLayer builds the MoE layer with prefix p ("decoder.layers.{i}."). It
// draws, in order, the router (and its bias), every expert's fc1 and fc2
// (global order; a rank keeps its local experts' expert-TP partitions and
// skips the others' draws) and the shared experts. The experts' biases
// (add_bias_linear) are zero, as the reference's: linear_fc1's split over
// expert TP as its weight's rows, linear_fc2's whole on every expert-TP
// rank (moe.MLPOptions.OmitFC2Bias says how it is added once).
func (b *builder) moeLayer(p string) (*moe.Layer, error) {
	cfg, par := b.cfg, b.experts
	if err := b.moeSupported(); err != nil {
		return nil, err
	}
	h, e := cfg.HiddenSize, cfg.NumMoEExperts
	f1, f, fs1, fs := moeWidths(cfg)
	local := e / moe.GroupSize(par.EP)
	first := moe.GroupRank(par.EP) * local
	etp, etpRank := moe.GroupSize(par.ETP), moe.GroupRank(par.ETP)
	stride := 1
	if cfg.GatedLinearUnit {
		stride = 2 // each rank holds its gate rows and its up rows
	}
	if f%etp != 0 {
		return nil, fmt.Errorf("gpt: the experts' ffn width %d is not divisible by expert_tensor_parallel_size %d: choose --moe-ffn-hidden-size a multiple of %d", f, etp, etp)
	}
	l := &moe.Layer{Config: b.moeConfig(), Parallel: par, FirstExpert: first}
	l.Parallel.Dispatcher = cfg.MoETokenDispatcherType
	l.Router = b.m.add(nn.NewParameter(p+"mlp.router.weight", tensor.New(e, h)))
	b.draw(l.Router.Value.Data(), e, h, cfg.InitMethodStd)
	l.Router.SequenceParallel = b.sp // each TP rank routes its own tokens
	if cfg.AddBiasLinear {
		l.RouterBias = b.m.add(nn.NewParameter(p+"mlp.router.bias", tensor.New(e)))
		b.draw(l.RouterBias.Value.Data(), e, 1, cfg.InitMethodStd) // (not with xavier: config refuses it)
		l.RouterBias.SequenceParallel = b.sp
	}
	expert := func(name string, sd float64, rows, cols, dim int) (*nn.Parameter, error) {
		w := tensor.New(rows, cols)
		b.draw(w.Data(), rows, cols, sd)
		shape := []int{rows, cols}
		shape[dim] /= etp
		q := nn.NewParameter(name, tensor.New(shape...))
		q.Allreduce = false
		if etp > 1 {
			q.TensorModelParallel, q.PartitionDim, q.PartitionStride = true, dim, 1
			if dim == 0 {
				q.PartitionStride = stride
			}
		}
		part, err := tp.PartitionOf(q, w, etpRank, etp)
		if err != nil {
			return nil, err
		}
		q.Value.CopyFrom(part)
		return b.m.add(q), nil
	}
	bias := func(name string, n int, split bool) *nn.Parameter {
		q := nn.NewParameter(name, tensor.New(n))
		q.Allreduce = false
		if split && etp > 1 {
			q = nn.NewParameter(name, tensor.New(n/etp))
			q.Allreduce = false
			q.TensorModelParallel, q.PartitionDim, q.PartitionStride = true, 0, stride
		}
		return b.m.add(q)
	}
	for j := range e {
		if j < first || j >= first+local {
			b.skip(f1 * h)
			b.skip(h * f)
			continue
		}
		q := fmt.Sprintf("%smlp.experts.local_experts.%d.", p, j)
		w1, err := expert(q+"linear_fc1.weight", cfg.InitMethodStd, f1, h, 0)
		if err != nil {
			return nil, err
		}
		if cfg.AddBiasLinear {
			l.FC1Bias = append(l.FC1Bias, bias(q+"linear_fc1.bias", f1, true))
		}
		w2, err := expert(q+"linear_fc2.weight", cfg.OutputLayerInitStd(), h, f, 1)
		if err != nil {
			return nil, err
		}
		if cfg.AddBiasLinear {
			l.FC2Bias = append(l.FC2Bias, bias(q+"linear_fc2.bias", h, false))
		}
		l.FC1, l.FC2 = append(l.FC1, w1), append(l.FC2, w2)
	}
	if fs > 0 {
		var err error
		sh := &moe.SharedMLP{Act: activation(cfg), Gated: cfg.GatedLinearUnit}
		if sh.FC1, err = tp.NewColumnParallelLinear(p+"mlp.shared_experts.linear_fc1", h, fs1, tp.ColumnParallelConfig{
			Group: b.tpg, Init: b.initMethod(cfg.InitMethodStd), Bias: cfg.AddBiasLinear, SkipBiasAdd: true, SequenceParallel: b.sp, Stride: stride,
			UnfusedWeightGrad: b.unfused,
		}); err != nil {
			return nil, err
		}
		if sh.FC2, err = tp.NewRowParallelLinear(p+"mlp.shared_experts.linear_fc2", fs, h, tp.RowParallelConfig{
			Group: b.tpg, Init: b.initMethod(cfg.OutputLayerInitStd()), Bias: cfg.AddBiasLinear, InputIsParallel: true, SequenceParallel: b.sp,
			UnfusedWeightGrad: b.unfused,
		}); err != nil {
			return nil, err
		}
		b.m.add(sh.Parameters()...)
		l.Shared = sh
	}
	if cfg.MoERouterEnableExpertBias {
		l.Bias, l.Counts = make([]float32, e), make([]float32, e)
	}
	return l, nil
}

// moeConfig is the MoE layers' configuration.
func (b *builder) moeConfig() moe.LayerConfig {
	cfg := b.cfg
	c := moe.LayerConfig{
		Router: moe.RouterOptions{
			NumExperts: cfg.NumMoEExperts, TopK: cfg.MoERouterTopK, ScoreFunction: cfg.MoERouterScoreFunction,
			PreSoftmax: cfg.MoERouterPreSoftmax, NumGroups: cfg.MoERouterNumGroups, GroupTopK: cfg.MoERouterGroupTopK,
			ScalingFactor: cfg.MoERouterTopKScalingFactor,
		},
		Balance: cfg.MoERouterLoadBalancingType, AuxCoeff: cfg.MoEAuxLossCoeff, ZCoeff: cfg.MoEZLossCoeff,
		MLPOptions: moe.MLPOptions{Act: activation(cfg), Gated: cfg.GatedLinearUnit, UnfusedWeightGrad: b.unfused},
		ExpertBias: cfg.MoERouterEnableExpertBias, UpdateRate: cfg.MoERouterBiasUpdateRate,
		GroupedGEMM: cfg.MoEGroupedGEMM,
	}
	if cfg.MoEExpertCapacityFactor > 0 {
		c.Drop = &moe.DropOptions{CapacityFactor: cfg.MoEExpertCapacityFactor, Policy: cfg.MoETokenDropPolicy, PadToCapacity: cfg.MoEPadExpertInputToCapacity}
	}
	return c
}

// MoELayers returns the chunk's MoE layers in order (the MTP depths'
// last).
func (m *Model) MoELayers() []*moe.Layer {
	var out []*moe.Layer
	for _, l := range m.AllLayers() {
		if l.MoE != nil {
			out = append(out, l.MoE)
		}
	}
	return out
}

// AllLayers returns the chunk's transformer layers: its decoder layers,
// then its MTP depths' layers.
func (m *Model) AllLayers() []*Layer {
	out := append([]*Layer(nil), m.Layers...)
	for _, l := range m.MTP {
		out = append(out, l.Layer)
	}
	return out
}

// BufferShapes returns the name and shape of every state tensor of the
// whole model that is not a parameter but belongs in a checkpoint: each
// MoE layer's expert bias decoder.layers.{i}.mlp.router.expert_bias [E]
// (with moe_router_enable_expert_bias; an MTP depth's
// mtp.layers.{k}.mtp_model_layer.mlp.router.expert_bias), as the
// reference's state dict holds the buffer.
func BufferShapes(cfg config.TransformerConfig) map[string][]int {
	out := map[string][]int{}
	if !cfg.MoERouterEnableExpertBias {
		return out
	}
	for i := range cfg.NumLayers {
		if cfg.IsMoELayer(i) {
			out[ExpertBiasName(fmt.Sprintf("decoder.layers.%d.", i))] = []int{cfg.NumMoEExperts}
		}
	}
	if mtpIsMoE(cfg) {
		for k := range cfg.MTPNumLayers {
			out[ExpertBiasName(mtpPrefix(k)+"mtp_model_layer.")] = []int{cfg.NumMoEExperts}
		}
	}
	return out
}

// ExpertBiasName is the checkpoint name of the expert bias of the MoE
// layer with prefix p (Layer.Prefix).
func ExpertBiasName(p string) string { return p + "mlp.router.expert_bias" }

// ExpertBiases returns the chunk's expert biases by name (BufferShapes's
// names), each the layer's live slice.
func (m *Model) ExpertBiases() map[string][]float32 {
	out := map[string][]float32{}
	for _, l := range m.AllLayers() {
		if l.MoE != nil && l.MoE.Bias != nil {
			out[ExpertBiasName(l.Prefix)] = l.MoE.Bias
		}
	}
	return out
}
