package gpt

import (
	"fmt"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
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
// [E, h], then per expert linear_fc1 [f₁, h] and linear_fc2 [h, f], then the
// shared experts' fc1 and fc2.
func moeDraws(cfg config.TransformerConfig) []int {
	h := cfg.HiddenSize
	f1, f, fs1, fs := moeWidths(cfg)
	out := []int{cfg.NumMoEExperts * h}
	for range cfg.NumMoEExperts {
		out = append(out, f1*h, h*f)
	}
	if fs > 0 {
		out = append(out, fs1*h, h*fs)
	}
	return out
}

// moeSupported reports what gotron's MoE layer does not do yet.
func moeSupported(cfg config.TransformerConfig, tpSize int) error {
	switch {
	case cfg.NumMoEExperts == 0:
		return nil
	case tpSize > 1 || cfg.ContextParallelSize > 1 || cfg.ExpertModelParallelSize > 1:
		return fmt.Errorf("gpt: MoE layers run on one tensor-, context- and expert-parallel rank so far (tensor_model_parallel_size %d, context_parallel_size %d, expert_model_parallel_size %d): use 1 for each with --num-experts", tpSize, cfg.ContextParallelSize, cfg.ExpertModelParallelSize)
	case cfg.AddBiasLinear:
		return fmt.Errorf("gpt: gotron's experts have no biases yet: add --disable-bias-linear to a MoE model")
	case cfg.CalculatePerTokenLoss:
		return fmt.Errorf("gpt: the MoE auxiliary losses under --calculate-per-token-loss are not built yet: drop it for a MoE model")
	case cfg.RecomputeGranularity == "full":
		return fmt.Errorf("gpt: full recompute of MoE layers is not built yet (its replay would count the routed tokens twice): use --recompute-granularity selective")
	}
	return nil
}

// moeLayer builds the MoE layer with prefix p ("decoder.layers.{i}.").
func (b *builder) moeLayer(p string) (*moe.Layer, error) {
	cfg := b.cfg
	if err := moeSupported(cfg, max(cfg.TensorModelParallelSize, 1)); err != nil {
		return nil, err
	}
	h, e := cfg.HiddenSize, cfg.NumMoEExperts
	f1, f, fs1, fs := moeWidths(cfg)
	draw := func(name string, sd float64, shape ...int) *nn.Parameter {
		w := tensor.New(shape...)
		b.g.FillNormal(w.Data(), 0, sd)
		return nn.NewParameter(name, w)
	}
	l := &moe.Layer{Config: b.moeConfig()}
	l.Router = draw(p+"mlp.router.weight", cfg.InitMethodStd, e, h)
	for j := range e {
		q := fmt.Sprintf("%smlp.experts.local_experts.%d.", p, j)
		l.FC1 = append(l.FC1, draw(q+"linear_fc1.weight", cfg.InitMethodStd, f1, h))
		l.FC2 = append(l.FC2, draw(q+"linear_fc2.weight", cfg.OutputLayerInitStd(), h, f))
	}
	if fs > 0 {
		l.SharedFC1 = draw(p+"mlp.shared_experts.linear_fc1.weight", cfg.InitMethodStd, fs1, h)
		l.SharedFC2 = draw(p+"mlp.shared_experts.linear_fc2.weight", cfg.OutputLayerInitStd(), h, fs)
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
		Act: activation(cfg), Gated: cfg.GatedLinearUnit,
		ExpertBias: cfg.MoERouterEnableExpertBias, UpdateRate: cfg.MoERouterBiasUpdateRate,
	}
	if cfg.MoEExpertCapacityFactor > 0 {
		c.Drop = &moe.DropOptions{CapacityFactor: cfg.MoEExpertCapacityFactor, Policy: cfg.MoETokenDropPolicy, PadToCapacity: cfg.MoEPadExpertInputToCapacity}
	}
	return c
}

// MoELayers returns the chunk's MoE layers in order.
func (m *Model) MoELayers() []*moe.Layer {
	var out []*moe.Layer
	for _, l := range m.Layers {
		if l.MoE != nil {
			out = append(out, l.MoE)
		}
	}
	return out
}
