package gpt

import "github.com/gotron/gotron/config"

// TrainingFLOPs returns the model FLOPs of one training iteration (forward
// and backward) over tokens tokens: 6·T·(Σ_layers W + (1 + D)·V·h) +
// 6·(L + D)·n·(d_qk + d_v)·s·T (Narayanan et al. 2021, arXiv 2104.04473,
// with the logit layer and the full s×s attention square; causal attention
// computes about half of it), where a dense layer's GEMM weights are
// W = h·(n + 2g)·d + n·d·h + h·f₁ + f·h (12h² for the GPT-2 shape, f₁ = 2f
// for a gated MLP), d_qk = d_v = d; under multi-latent attention the
// attention's are its projections' (mlaWeights) with d_qk = qk_head_dim +
// qk_pos_emb_head_dim and d_v = v_head_dim; a MoE layer counts its active
// weights only: the attention's, the router's E·h and k experts' h·f₁ +
// f·h (f the expert width: --moe-ffn-hidden-size, else --ffn-hidden-size,
// config.MoEFFN). The D MTP depths add a layer each (MoE when the
// decoder's last is), eh_proj's 2h·h and an output layer. V is the
// vocabulary as given (unpadded).
func TrainingFLOPs(cfg config.TransformerConfig, tokens int) float64 {
	T, h, s, V := float64(tokens), float64(cfg.HiddenSize), float64(cfg.SeqLength), float64(cfg.VocabSize)
	n, dqk, dv := float64(cfg.NumAttentionHeads), float64(cfg.HeadDim()), float64(cfg.HeadDim())
	attn := h*float64(cfg.QKVWidth()) + float64(cfg.AttentionWidth())*h
	if cfg.MultiLatentAttention {
		attn = mlaWeights(cfg)
		dqk, dv = float64(cfg.MLAQHeadDim()), float64(cfg.VHeadDim)
	}
	layer := func(moeLayer bool) float64 {
		if !moeLayer {
			return attn + h*float64(cfg.FC1Width()) + float64(cfg.FFN())*h
		}
		f := float64(cfg.MoEFFN())
		f1 := f
		if cfg.GatedLinearUnit {
			f1 = 2 * f
		}
		return attn + float64(cfg.NumMoEExperts)*h + float64(cfg.MoERouterTopK)*(h*f1+f*h)
	}
	var weights float64
	for i := range cfg.NumLayers {
		weights += layer(cfg.IsMoELayer(i))
	}
	d := float64(cfg.MTPNumLayers)
	if d > 0 {
		weights += d * (2*h*h + layer(mtpIsMoE(cfg)))
	}
	return 6*T*(weights+(1+d)*V*h) + 6*(float64(cfg.NumLayers)+d)*n*(dqk+dv)*s*T
}

// mlaWeights are an MLA layer's attention GEMM weights: its projections
// (q_proj, or q_down and q_up; kv_down, kv_up) and linear_proj.
func mlaWeights(cfg config.TransformerConfig) float64 {
	var w float64
	for _, k := range mlaDraws(cfg) {
		w += float64(k)
	}
	return w + float64(cfg.AttentionWidth()*cfg.HiddenSize)
}
