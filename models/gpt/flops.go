package gpt

import "github.com/gotron/gotron/config"

// TrainingFLOPs returns the model FLOPs of one training iteration (forward
// and backward) over tokens tokens: 6·T·(Σ_layers W + V·h) + 12·L·n·d·s·T
// (Narayanan et al. 2021, arXiv 2104.04473, with the logit layer and the
// full s×s attention square; causal attention computes about half of
// it), where a dense layer's GEMM weights are W = h·(n + 2g)·d + n·d·h +
// h·f₁ + f·h (12h² for the GPT-2 shape, f₁ = 2f for a gated MLP) and a MoE
// layer counts its active weights only: the attention's, the router's E·h
// and k experts' h·f₁ + f·h. V is the vocabulary as given (unpadded).
func TrainingFLOPs(cfg config.TransformerConfig, tokens int) float64 {
	T, h, s, V := float64(tokens), float64(cfg.HiddenSize), float64(cfg.SeqLength), float64(cfg.VocabSize)
	nd := float64(cfg.AttentionWidth())
	attn := h*float64(cfg.QKVWidth()) + nd*h
	dense := attn + h*float64(cfg.FC1Width()) + float64(cfg.FFN())*h
	var weights float64
	for i := range cfg.NumLayers {
		if !cfg.IsMoELayer(i) {
			weights += dense
			continue
		}
		f := float64(cfg.MoEFFNHiddenSize)
		f1 := f
		if cfg.GatedLinearUnit {
			f1 = 2 * f
		}
		weights += attn + float64(cfg.NumMoEExperts)*h + float64(cfg.MoERouterTopK)*(h*f1+f*h)
	}
	return 6*T*(weights+V*h) + 12*float64(cfg.NumLayers)*nd*s*T
}
