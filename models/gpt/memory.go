package gpt

import (
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/moe"
)

// ActivationStats receives, when set as Inputs.Stats, the tape's
// activation bytes (autograd.Tape.ActivationBytes: what the forward pass
// keeps for backward) at the boundaries of a recorded Forward.
type ActivationStats struct {
	// Start is the count when Forward began (what earlier micro-batches
	// still hold).
	Start int64
	// AfterEmbedding is the count after the embeddings and their dropout.
	AfterEmbedding int64
	// AfterLayer[i] is the count after layer i.
	AfterLayer []int64
	// AfterHead is the count after the main loss (AfterLoss without MTP);
	// AfterMTP[k] after MTP depth k's loss.
	AfterHead int64
	AfterMTP  []int64
	// AfterLoss is the count at the end of Forward.
	AfterLoss int64
}

// ActivationEstimate is gotron's activation memory per rank, in bytes, at
// the end of one micro-batch's forward pass: what the formulas of
// docs/MEMORY.md predict for a config, and what ActivationStats measure.
type ActivationEstimate struct {
	// Embedding is the embeddings' share (the dropout mask).
	Embedding int64
	// PerLayer is one transformer layer's share, averaged over a recompute
	// chunk under full recompute.
	PerLayer int64
	// Head is the final layer norm's, the output layer's and the loss's.
	Head int64
	// PerMoELayer is one MoE layer's share (0 without experts): PerLayer
	// with the experts' terms (moeActivations) in place of the dense
	// MLP's.
	PerMoELayer int64
	// RoutingDependent reports that PerMoELayer is the expectation under
	// a balanced routing rather than exact: with expert parallelism the
	// rows a rank's experts receive depend on where the tokens go, and so
	// does what capacity dropping keeps when it does not pad.
	RoutingDependent bool
	// MTP is one multi-token-prediction depth's share, its loss included
	// (0 without MTP).
	MTP int64
	// Total = Embedding + the layers' (PerLayer each, PerMoELayer each MoE
	// layer) + Head + mtp_num_layers·MTP.
	Total int64
}

// Layer returns decoder layer i's share under cfg: PerMoELayer for a MoE
// layer, else PerLayer.
func (e ActivationEstimate) Layer(cfg config.TransformerConfig, i int) int64 {
	if cfg.IsMoELayer(i) {
		return e.PerMoELayer
	}
	return e.PerLayer
}

// EstimateActivations returns gotron's activation memory per rank for a
// micro-batch of b rows under cfg (its TP size, sequence parallelism,
// context parallelism, recompute settings and model options), with
// s = seq_length/cp (a context-parallel rank holds s/cp tokens of every
// sequence, and its attention keeps what the one-rank attention keeps for
// them), h = hidden, n = heads, g = query groups, d = head dim, f = ffn,
// f₁ = linear_fc1's width (2f gated), t = TP, V_p = padded vocabulary,
// everything float32 (4 bytes) and dropout masks 1 byte per element:
//
//	layer = r·(16·sbh + 2·sbh·[p>0] + 2·k·4·sb) + (12·sbnd + 4·sbnd + 4·sbf₁ + 4·sbf)/t
//	        + 4·nbs/t + qk/t
//
// where r = 1/t under sequence parallelism (the replicated inputs of the
// norms, of linear_qkv and linear_fc1, the two dropout masks and the norms'
// statistics, held per sequence shard) and 1 otherwise; k = 2 statistics
// per row for LayerNorm (mean and 1/σ), 1 for RMSNorm. The split terms are
// the multi-head qkv the attention keeps (12sbnd/t: with grouped queries
// the keys and values repeated per head), the attention context (4sbnd/t),
// the activation's input and linear_fc2's input (4sbf₁/t + 4sbf/t), and
// the attention's log-sum-exp rows (4nbs/t, dropped by selective
// recompute). With qk_layernorm, qk = 4·sb·(n + 2g)·d (linear_qkv's output,
// kept for the norms' backward) + k·4·sb·(n + g) (their statistics).
// Full recompute keeps only each chunk's input, 4sbh (·1/t when
// distributed or sequence parallel) per RecomputeNumLayers layers. The
// head keeps the final norm's input and output (8·sbh·r + k·4·sb·r) and
// the logits with one log-sum-exp per token (4·sb·V_p/t + 8·sb, 4·sb on one
// rank without padding). Under multi-latent attention the attention terms
// are mlaActivations' instead; a MoE layer's MLP terms are
// moeActivations'. Each MTP depth keeps the embedding's mask, 12·sbh·r
// + 2·k·4·sb·r (enorm's input, eh_proj's [s, b, 2h] input, the two norms'
// statistics), a layer and a head; under full recompute the mask, its
// embedding (4·sbh·r) and a head without the final norm's input and
// statistics (mtpActivations). See docs/MEMORY.md for the comparison with
// Korthikanti et al. 2022.
func EstimateActivations(cfg config.TransformerConfig, b int) ActivationEstimate {
	return EstimateActivationsAt(cfg, b, 4)
}

// EstimateActivationsAt is EstimateActivations with x bytes for each
// element of an activation tensor in place of float32's 4: what a device
// keeping 16-bit activations (x = 2) holds for the same model, as
// Megatron's bf16 runs on GPUs do. The dropout masks stay a byte per
// element, and the norms' statistics, the attention's log-sum-exp rows,
// the router's scores and probabilities and the output layer's logits
// (the loss reads them in float32) stay float32.
func EstimateActivationsAt(cfg config.TransformerConfig, b int, x int64) ActivationEstimate {
	s, h, a, f := int64(cfg.SeqLength/max(cfg.ContextParallelSize, 1)), int64(cfg.HiddenSize), int64(cfg.NumAttentionHeads), int64(cfg.FFN())
	nd, f1, g := int64(cfg.AttentionWidth()), int64(cfg.FC1Width()), int64(cfg.QueryGroups())
	t := int64(max(cfg.TensorModelParallelSize, 1))
	B := int64(b)
	sp := cfg.SequenceParallel && t > 1
	// rep divides what every TP rank would hold whole by t under SP.
	rep := func(x int64) int64 {
		if sp {
			return x / t
		}
		return x
	}
	stats := int64(8) // bytes of norm statistics per row
	if cfg.RMSNorm() {
		stats = 4
	}
	sbh, sb := s*B*h, s*B
	var e ActivationEstimate
	if cfg.HiddenDropout > 0 {
		e.Embedding = rep(sbh)
	}
	layer := rep(4*x*sbh + 2*stats*sb)
	switch {
	case cfg.MultiLatentAttention:
		layer += mlaActivations(cfg, sb, t, stats, x, rep)
	default:
		layer += (3*x*sb*nd + x*sb*nd) / t
		if cfg.QKLayernorm {
			layer += (x*sb*int64(cfg.QKVWidth()) + stats*sb*(a+g)) / t
		}
	}
	if cfg.HiddenDropout > 0 {
		layer += rep(2 * sbh)
	}
	if cfg.RecomputeGranularity != "selective" {
		layer += 4 * a * B * s / t
	}
	e.PerLayer = layer + (x*sb*f1+x*sb*f)/t
	if cfg.NumMoEExperts > 0 {
		moe, exact := moeActivations(cfg, sb, t, x, rep)
		e.PerMoELayer, e.RoutingDependent = layer+moe, !exact
	}
	if cfg.RecomputeGranularity == "full" {
		in := x * sbh
		if sp || cfg.DistributeSavedActivations && t > 1 {
			in /= t
		}
		e.PerLayer = in / int64(max(cfg.RecomputeNumLayers, 1))
		if cfg.RecomputeMethod == "block" {
			// Only the first RecomputeNumLayers layers are checkpointed;
			// PerLayer is their share.
			e.PerLayer = in
		}
		if cfg.NumMoEExperts > 0 {
			e.PerMoELayer = e.PerLayer // a checkpoint keeps the input alone
		}
	}
	vp := int64(cfg.PaddedVocabSize())
	lse := 8 * sb
	if t == 1 && vp == int64(cfg.VocabSize) {
		lse = 4 * sb
	}
	e.Head = rep(2*x*sbh+stats*sb) + 4*sb*vp/t + lse
	if cfg.MTPNumLayers > 0 {
		e.MTP = mtpActivations(cfg, e, rep(sbh), rep(stats*sb), x)
	}
	e.Total = e.Embedding + e.layers(cfg, b, x) + e.Head + int64(cfg.MTPNumLayers)*e.MTP
	return e
}

// layers is the decoder layers' share: each layer's, except that block
// recompute leaves the layers after its first RecomputeNumLayers whole.
func (e ActivationEstimate) layers(cfg config.TransformerConfig, b int, x int64) int64 {
	whole := e
	if cfg.RecomputeGranularity == "full" && cfg.RecomputeMethod == "block" {
		plain := cfg
		plain.Recompute = config.Recompute{}
		whole = EstimateActivationsAt(plain, b, x)
	}
	var n int64
	for i := range cfg.NumLayers {
		if cfg.RecomputeMethod == "block" && i >= cfg.RecomputeNumLayers {
			n += whole.Layer(cfg, i)
		} else {
			n += e.Layer(cfg, i)
		}
	}
	return n
}

// moeActivations is a MoE layer's MLP share, in place of the dense MLP's,
// for a rank holding T = r·sb tokens (r = 1/t under sequence
// parallelism), E experts, top-k, ep·etp ranks on the expert grid. The
// router keeps its map, scores and chosen experts, T·E·(1 + 4) + 8·T·k
// bytes, and with a load-balancing or z loss their gradient, 4·T·E. The
// router sends out R = k·T rows (capacity dropping: E·min(c, T) padded,
// at most min(k·T, E·c) otherwise, c = moe.Capacity(k·T, E, factor)).
// This rank's experts receive N = R·etp of them (every expert-TP rank
// runs all its experts' rows; with ep > 1, R·etp is the balanced
// expectation: the tokens go where the router sends them) and keep their
// input 4·N·h and linear_fc1's output 4·N·f₁/etp (SequentialMLP also
// linear_fc2's input, 4·N·f/etp; the grouped MLP recomputes it). The
// combine keeps the experts' output and the probabilities it weights
// them by: under the all-gather dispatcher the N gathered rows, 4·N·h,
// and every tp-ep rank's probabilities, 4·ep·etp·T·E; under the
// all-to-all one (and on one rank) this rank's R rows and T·E
// probabilities. The permutation's dispatch lists keep 16 bytes per row
// it permutes (N gathered, else R) and per expert. Shared experts keep
// what the dense MLP keeps at their width, (4·sb·fs₁ + 4·sb·fs)/t. exact
// is false where N depends on the routing.
func moeActivations(cfg config.TransformerConfig, sb, t, x int64, rep func(int64) int64) (bytes int64, exact bool) {
	f1, f, fs1, fs := moeWidths(cfg)
	h, e, k := int64(cfg.HiddenSize), int64(cfg.NumMoEExperts), int64(cfg.MoERouterTopK)
	ep, etp := int64(max(cfg.ExpertModelParallelSize, 1)), int64(max(cfg.EffectiveExpertTensorParallelSize(), 1))
	tok := rep(sb)
	routed, exact := moeRoutedRows(cfg, tok)
	exact = exact && ep == 1
	bytes = tok*e*5 + 8*tok*k
	if cfg.MoERouterLoadBalancingType != "none" && cfg.MoEAuxLossCoeff > 0 || cfg.MoEZLossCoeff > 0 {
		bytes += 4 * tok * e
	}
	rows := routed * etp
	expertMLP := x*rows*h + x*rows*int64(f1)/etp
	if !cfg.MoEGroupedGEMM {
		expertMLP += x * rows * int64(f) / etp
	}
	combine, permuted := x*routed*h+4*tok*e, routed
	if ep*etp > 1 && cfg.MoETokenDispatcherType != moe.AllToAllDispatcher {
		combine, permuted = x*rows*h+4*ep*etp*tok*e, rows
	}
	bytes += expertMLP + combine + 16*(permuted+e) + (x*sb*int64(fs1)+x*sb*int64(fs))/t
	return bytes, exact
}

// moeRoutedRows is the rows the router sends out for tok tokens, and
// whether the config fixes it: k·tok, or under capacity dropping (c =
// moe.Capacity(k·tok, E, factor)) E·min(c, tok) when padded to capacity,
// k·tok when c ≥ tok (nothing is dropped), else at most min(k·tok, E·c).
func moeRoutedRows(cfg config.TransformerConfig, tok int64) (int64, bool) {
	e, k := int64(cfg.NumMoEExperts), int64(cfg.MoERouterTopK)
	factor := cfg.MoEExpertCapacityFactor
	if factor <= 0 {
		return k * tok, true
	}
	c := int64(moe.Capacity(int(k*tok), int(e), factor))
	switch {
	case cfg.MoEPadExpertInputToCapacity:
		return e * min(c, tok), true
	case c >= tok:
		return k * tok, true
	}
	return min(k*tok, e*c), false
}

// mlaActivations is an MLA layer's attention share beyond the replicated
// part every layer keeps (its projections read the input norm's output):
// the attention core's packed input, 12·sb·n·d/t (d = max(q_d, v_d),
// mlaHeadDim); the query latent's kept copies, r·(8·sb·q_lora + k·4·sb)
// with q_layernorm (its input and output) or r·4·sb·q_lora without, and
// the same of the key-value latent; linear_proj's input 4·sb·n·v_d/t; and
// under context parallelism without selective recompute, when d ≠ v_d,
// the ring attention's output 4·sb·n·d/t, kept beside linear_proj's
// narrower input.
func mlaActivations(cfg config.TransformerConfig, sb, t, stats, x int64, rep func(int64) int64) int64 {
	a := cfg.MLA
	n, d, vd := int64(cfg.NumAttentionHeads), int64(mlaHeadDim(a)), int64(a.VHeadDim)
	latent := func(w int) int64 {
		if cfg.QKLayernorm {
			return rep(2*x*sb*int64(w) + stats*sb)
		}
		return rep(x * sb * int64(w))
	}
	out := 3*x*sb*n*d/t + latent(a.KVLoRARank) + x*sb*n*vd/t
	if a.QLoRARank > 0 {
		out += latent(a.QLoRARank)
	}
	if d != vd && cfg.ContextParallelSize > 1 && cfg.RecomputeGranularity != "selective" {
		out += x * sb * n * d / t
	}
	return out
}

// mtpActivations is one MTP depth's share: the embedding's (dropout mask),
// enorm's input and statistics, hnorm's statistics (its input is the output
// layer's input, one storage), eh_proj's input [s, b, 2h] (rsbh = r·sbh
// elements each, a norm's statistics rStats bytes), the layer's and a
// head's. Under full recompute the projection, the layer and the final
// norm are checkpointed: the depth keeps the embedding's mask, the
// checkpoint's embedding input (its hidden-states input is the output
// layer's input again) and a head without the final norm's input and
// statistics.
func mtpActivations(cfg config.TransformerConfig, e ActivationEstimate, rsbh, rStats, x int64) int64 {
	if cfg.RecomputeGranularity == "full" {
		return e.Embedding + x*rsbh + (e.Head - x*rsbh - rStats)
	}
	return e.Embedding + 3*x*rsbh + 2*rStats + e.Layer(cfg, cfg.NumLayers-1) + e.Head
}
