package config

import "math"

// MLA holds the multi-latent-attention fields of TransformerConfig
// (Megatron-Core's MLATransformerConfig; DeepSeek-V2 §2.1, arXiv
// 2405.04434): with MultiLatentAttention each layer's attention projects
// the hidden states down to a latent of KVLoRARank (and of QLoRARank for
// the queries, 0: a direct query projection), then up per head to
// QKHeadDim channels without position plus QKPosEmbHeadDim rotated ones
// (the keys' rotated part shared by every head), and to VHeadDim value
// channels (docs/SEMANTICS.md § Multi-latent attention).
type MLA struct {
	// MultiLatentAttention replaces linear_qkv by MLA's projections
	// (multi_latent_attention, --multi-latent-attention).
	MultiLatentAttention bool `json:"multi_latent_attention,omitempty"`
	// QLoRARank is the queries' latent width (q_lora_rank); 0 means none
	// (the reference's None): linear_q_proj maps h straight to the heads.
	QLoRARank int `json:"q_lora_rank,omitempty"`
	// KVLoRARank is the keys' and values' latent width (kv_lora_rank, 32).
	KVLoRARank int `json:"kv_lora_rank,omitempty"`
	// QKHeadDim, QKPosEmbHeadDim and VHeadDim are a head's query/key
	// channels without position (128), with the rotary embedding (64) and
	// value channels (128).
	QKHeadDim       int `json:"qk_head_dim,omitempty"`
	QKPosEmbHeadDim int `json:"qk_pos_emb_head_dim,omitempty"`
	VHeadDim        int `json:"v_head_dim,omitempty"`
	// RopeType is MLA's rotary embedding, "rope" or "yarn" (rope_type;
	// MLA's default "yarn", which with RotaryScalingFactor 1 is RoPE).
	RopeType string `json:"rope_type,omitempty"`
	// RotaryScalingFactor, OriginalMaxPositionEmbeddings, BetaFast,
	// BetaSlow, MScale and MScaleAllDim are YaRN's (rotary_scaling_factor 1,
	// original_max_position_embeddings 4096, beta_fast 32, beta_slow 1,
	// mscale 1, mscale_all_dim 0).
	RotaryScalingFactor           float64 `json:"rotary_scaling_factor,omitempty"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings,omitempty"`
	BetaFast                      float64 `json:"beta_fast,omitempty"`
	BetaSlow                      float64 `json:"beta_slow,omitempty"`
	MScale                        float64 `json:"mscale,omitempty"`
	MScaleAllDim                  float64 `json:"mscale_all_dim,omitempty"`
}

// DefaultMLA returns the reference's MLA settings (its training
// arguments' defaults), off.
func DefaultMLA() MLA {
	return MLA{KVLoRARank: 32, QKHeadDim: 128, QKPosEmbHeadDim: 64, VHeadDim: 128, RopeType: "yarn",
		RotaryScalingFactor: 1, OriginalMaxPositionEmbeddings: 4096, BetaFast: 32, BetaSlow: 1, MScale: 1}
}

// MLAQHeadDim is a query's (and key's) channels per head under MLA:
// qk_head_dim + qk_pos_emb_head_dim.
func (m MLA) MLAQHeadDim() int { return m.QKHeadDim + m.QKPosEmbHeadDim }

// yarnMScale is the reference's _yarn_get_mscale: 1 for a scale ≤ 1, else
// 0.1·mscale·ln(scale) + 1.
func yarnMScale(scale, mscale float64) float64 {
	if scale <= 1 {
		return 1
	}
	return 0.1*mscale*math.Log(scale) + 1
}

// MLASoftmaxScale is MLA's attention scale: m²/√(qk_head_dim +
// qk_pos_emb_head_dim), m = _yarn_get_mscale(rotary_scaling_factor,
// mscale_all_dim) (1 without YaRN's scaling).
func (m MLA) MLASoftmaxScale() float64 {
	s := yarnMScale(m.RotaryScalingFactor, m.MScaleAllDim)
	return s * s / math.Sqrt(float64(m.MLAQHeadDim()))
}

// MLARotaryFactor is the factor YaRN multiplies the rotary cosines and
// sines by (its concentration factor): mscale(f, mscale)/mscale(f,
// mscale_all_dim); 1 for RoPE.
func (m MLA) MLARotaryFactor() float64 {
	if m.RopeType != "yarn" {
		return 1
	}
	return yarnMScale(m.RotaryScalingFactor, m.MScale) / yarnMScale(m.RotaryScalingFactor, m.MScaleAllDim)
}

// MLAInvFreq returns the inverse frequencies of MLA's rotary embedding
// over r channels (RotaryDim) and base (float32 steps as the
// reference's): base^(−2i/r), or under YaRN those blended with the same
// over rotary_scaling_factor by a linear ramp over the correction range
// of beta_fast and beta_slow rotations in original_max_position_embeddings
// (yarn_rotary_pos_embedding.py).
func (m MLA) MLAInvFreq(base float64, r int) []float32 {
	extra := make([]float32, r/2)
	for i := range extra {
		extra[i] = 1 / float32(math.Pow(base, float64(float32(2*i)/float32(r))))
	}
	if m.RopeType != "yarn" {
		return extra
	}
	corr := func(rot float64) float64 {
		return float64(r) * math.Log(float64(m.OriginalMaxPositionEmbeddings)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low, high := max(math.Floor(corr(m.BetaFast)), 0), min(math.Ceil(corr(m.BetaSlow)), float64(r-1))
	if low == high {
		high += 0.001
	}
	f := float32(m.RotaryScalingFactor)
	out := make([]float32, r/2)
	for i := range out {
		inter := 1 / (f * float32(math.Pow(base, float64(float32(2*i)/float32(r)))))
		ramp := min(max((float32(i)-float32(low))/(float32(high)-float32(low)), 0), 1)
		mask := 1 - ramp
		out[i] = inter*(1-mask) + extra[i]*mask
	}
	return out
}

// mlaViolations reports the MLA settings that cannot be: the reference's
// refusals and the sizes.
func (c TransformerConfig) mlaViolations(vs *violationList) {
	m := c.MLA
	if !m.MultiLatentAttention {
		return
	}
	if c.NumQueryGroups > 0 && c.NumQueryGroups != c.NumAttentionHeads {
		vs.add(fieldList("multi_latent_attention", "num_query_groups"),
			"multi_latent_attention with num_query_groups %d: grouped-query attention is mutually exclusive with multi-latent attention (the reference's rule); drop --group-query-attention", c.NumQueryGroups)
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"kv_lora_rank", m.KVLoRARank}, {"qk_head_dim", m.QKHeadDim}, {"qk_pos_emb_head_dim", m.QKPosEmbHeadDim}, {"v_head_dim", m.VHeadDim}} {
		if d.v < 1 {
			vs.add(fieldList(d.name), "%s is %d under multi_latent_attention: it must be at least 1; set --%s", d.name, d.v, dashed(d.name))
		}
	}
	if m.QLoRARank < 0 {
		vs.add(fieldList("q_lora_rank"), "q_lora_rank is %d: it must be at least 1, or 0 (unset) for no query latent; set --q-lora-rank", m.QLoRARank)
	}
	if m.QKPosEmbHeadDim%2 != 0 {
		vs.add(fieldList("qk_pos_emb_head_dim"), "qk_pos_emb_head_dim is %d: the rotary embedding turns channel pairs, so it must be even; set --qk-pos-emb-head-dim", m.QKPosEmbHeadDim)
	}
	if m.RopeType != "rope" && m.RopeType != "yarn" {
		vs.add(fieldList("rope_type"), "rope_type is %q: multi-latent attention takes rope or yarn; set --rope-type", m.RopeType)
	}
	if m.RopeType == "yarn" && (!(m.RotaryScalingFactor > 0) || m.OriginalMaxPositionEmbeddings < 1 || !(m.BetaFast > 0) || !(m.BetaSlow > 0) || math.IsNaN(m.MScale) || math.IsNaN(m.MScaleAllDim)) {
		vs.add(fieldList("rotary_scaling_factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"),
			"YaRN needs rotary_scaling_factor > 0 (%g), original_max_position_embeddings ≥ 1 (%d), beta_fast and beta_slow > 0 (%g, %g) and finite mscale, mscale_all_dim (%g, %g): set --rotary-scaling-factor, --yarn-original-max-position-embeddings, --yarn-beta-fast, --yarn-beta-slow, --mscale, --mscale-all-dim",
			m.RotaryScalingFactor, m.OriginalMaxPositionEmbeddings, m.BetaFast, m.BetaSlow, m.MScale, m.MScaleAllDim)
	}
	if tp := max(c.TensorModelParallelSize, 1); tp > 1 {
		for _, d := range []struct {
			name string
			v    int
		}{{"q_lora_rank", m.QLoRARank}, {"kv_lora_rank + qk_pos_emb_head_dim", m.KVLoRARank + m.QKPosEmbHeadDim}} {
			if d.v%tp != 0 {
				vs.add(fieldList("tensor_model_parallel_size", "kv_lora_rank", "qk_pos_emb_head_dim", "q_lora_rank"),
					"%s = %d is not divisible by tensor_model_parallel_size %d: the down projections are column-parallel; choose sizes that divide", d.name, d.v, tp)
			}
		}
	}
}

// RotarySpec is the rotary embedding the model's attention applies: Rot
// rotated channels per head (pairs interleaved or not), InvFreq their
// rot/2 inverse frequencies (nil: RoPE's, Base^(−2k/Rot)), the cosines and
// sines multiplied by Factor.
type RotarySpec struct {
	Rot         int
	Interleaved bool
	Base        float64
	InvFreq     []float32
	Factor      float32
}

// Rotary returns the model's rotary embedding, ok false when no layer
// rotates: RoPE's over RotaryDim channels of every query and key head
// (position_embedding_type rope), or MLA's over the qk_pos_emb_head_dim
// channels (the first RotaryDim of them), with its RoPE or YaRN
// frequencies and factor. MLA's
// reference de-interleaves those channels and rotates halves
// (apply_rotary_pos_emb with mla_rotary_interleaved); that is the
// interleaved rotation up to one permutation of the channels of queries
// and keys alike, which their dot product does not see, so gotron rotates
// them interleaved in place.
func (c TransformerConfig) Rotary() (RotarySpec, bool) {
	if c.MultiLatentAttention {
		rot := c.RotaryDim()
		return RotarySpec{Rot: rot, Interleaved: true, InvFreq: c.MLAInvFreq(float64(c.RotaryBase), rot), Factor: float32(c.MLARotaryFactor())}, true
	}
	if !c.UsesRoPE() {
		return RotarySpec{}, false
	}
	return RotarySpec{Rot: c.RotaryDim(), Interleaved: c.RotaryInterleaved, Base: float64(c.RotaryBase), Factor: 1}, true
}
