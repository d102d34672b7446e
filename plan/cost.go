package plan

import (
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/moe"
)

// device is the hardware as one rank of a run sees it: the peak of the
// run's GEMM type and the bytes of an activation element.
type device struct {
	hw   Hardware
	peak float64 // FLOP/s
	elem float64 // bytes of an activation element: 2 in bf16 and fp16, 4 in float32
}

// gemm is the time of an m×k by k×n matrix product: 2mnk FLOPs at the
// peak times the GEMM efficiency, scaled by d/(d + GEMMHalfDim) for the
// smallest dimension d.
func (d device) gemm(m, n, k float64) float64 {
	e := d.hw.Efficiency
	small := min(m, n, k)
	return 2 * m * n * k / (d.peak * e.GEMM * small / (small + e.GEMMHalfDim))
}

// memory is the time element-wise kernels take to move bytes through the
// device's memory.
func (d device) memory(bytes float64) float64 {
	return bytes / (d.hw.MemoryBandwidthGBs * 1e9 * d.hw.Efficiency.Memory)
}

// ring is the time of a ring collective over n devices on link l in
// which each device moves steps/n of bytes, steps times: an all-gather or
// a reduce-scatter of a bytes-long tensor is steps = n−1, an all-reduce
// 2(n−1).
func (d device) ring(bytes float64, n, steps int, l Link) float64 {
	if n < 2 {
		return 0
	}
	return float64(steps)*(bytes/float64(n)/(l.BusBandwidthGBs*1e9*d.hw.Efficiency.Collective)) + float64(steps)*l.LatencyUS*1e-6
}

func (d device) allReduce(bytes float64, n int, l Link) float64 { return d.ring(bytes, n, 2*(n-1), l) }
func (d device) allGather(bytes float64, n int, l Link) float64 { return d.ring(bytes, n, n-1, l) }

// allToAll is an all-to-all of bytes on each of n devices: (n−1)/n of
// them leave, as in an all-gather.
func (d device) allToAll(bytes float64, n int, l Link) float64 { return d.ring(bytes, n, n-1, l) }

// message is a point-to-point message's time.
func (d device) message(bytes float64, l Link) float64 {
	return bytes/(l.BusBandwidthGBs*1e9*d.hw.Efficiency.Collective) + l.LatencyUS*1e-6
}

// work is a stretch of one rank's time by what it waits on: its own
// kernels, and the tensor-, context-, expert- and (Megatron-FSDP's, layer
// by layer) data-parallel communication they cannot hide.
type work struct {
	Compute, TP, CP, EP, DP float64
}

func (w work) total() float64 { return w.Compute + w.TP + w.CP + w.EP + w.DP }

func (w work) plus(o work) work {
	return work{w.Compute + o.Compute, w.TP + o.TP, w.CP + o.CP, w.EP + o.EP, w.DP + o.DP}
}

// phases are one micro-batch's forward F, input-gradient backward B and
// weight-gradient W on a model chunk.
type phases struct{ F, B, W work }

func (p phases) plus(o phases) phases { return phases{p.F.plus(o.F), p.B.plus(o.B), p.W.plus(o.W)} }

// layout is where a run's ranks sit: the sizes and links of its groups.
type layout struct {
	hw             Hardware
	tp, cp, dp, pp int
	// ep and etp are the expert-parallel and expert-tensor-parallel
	// sizes, edp the expert data-parallel size (the world over etp·ep·pp).
	ep, etp, edp int
	// tpLink, cpLink, dpLink and ppLink are the links each group's
	// collectives cross (link): the tensor-parallel group, the
	// context-parallel group, the data- and context-parallel group of the
	// gradients' reduction, and a pipeline stage's next; epLink, etpLink
	// and edpLink the expert groups' (expert ranks are numbered etp
	// fastest, then ep, edp and pp).
	tpLink, cpLink, dpLink, ppLink Link
	epLink, etpLink, edpLink       Link
}

func newLayout(hw Hardware, tp, cp, dp, pp int) layout {
	return newExpertLayout(hw, tp, cp, dp, pp, 1, 1)
}

// newExpertLayout is newLayout with ep·etp expert ranks in each group of
// tp·cp·dp.
func newExpertLayout(hw Hardware, tp, cp, dp, pp, ep, etp int) layout {
	l := layout{hw: hw, tp: tp, cp: cp, dp: dp, pp: pp, ep: ep, etp: etp, edp: max(tp*cp*dp/(ep*etp), 1)}
	l.tpLink, l.cpLink, l.dpLink = l.link(tp, 1), l.link(tp*cp, tp), l.link(tp*cp*dp, tp)
	l.etpLink, l.epLink, l.edpLink = l.link(etp, 1), l.link(etp*ep, etp), l.link(tp*cp*dp, etp*ep)
	// A stage's next stage is tp·cp·dp ranks on, one message on one link:
	// in the node when two stages fit in one.
	l.ppLink = hw.InterNode
	if 2*tp*cp*dp <= hw.DevicesPerNode || pp < 2 {
		l.ppLink = hw.IntraNode
	}
	return l
}

// link is what a ring collective sees of a group whose members are
// stride ranks apart over span ranks. Ranks are numbered tp fastest, then
// cp, dp and pp (Megatron's default order), and fill the nodes in turn: a
// group within one node uses its intra-node link; a group across nodes
// with k members in each runs k rings side by side on the nodes' k
// adapters (rail-optimised, as DGX clusters are), at k times the
// inter-node rate, at most the intra-node one.
func (l layout) link(span, stride int) Link {
	hw := l.hw
	if span <= hw.DevicesPerNode {
		return hw.IntraNode
	}
	out := hw.InterNode
	if k := hw.DevicesPerNode / max(stride, 1); k > 1 {
		out.BusBandwidthGBs = min(hw.IntraNode.BusBandwidthGBs, out.BusBandwidthGBs*float64(k))
	}
	return out
}

// dpcp is the size of the gradients' reduction group: the data- and
// context-parallel ranks.
func (l layout) dpcp() int { return l.dp * l.cp }

// costModel prices a run's pieces on a device and a layout.
type costModel struct {
	d   device
	l   layout
	cfg config.TransformerConfig
	b   float64 // micro-batch rows
	// split says the schedule splits backward into B and W (the
	// zero-bubble schedules): the weight-gradient GEMMs leave the
	// backward, and the communication they hid is exposed.
	split bool
	// flash says the attention core is flash attention (not
	// Run.UnfusedAttention).
	flash bool
	// fsdp is Megatron-FSDP's sharding of gradients (ShardGrads) and
	// parameters (ShardParams) layer by layer, with the parameters a rank
	// holds of a dense and of a MoE layer (whole, before the sharding).
	fsdp            fsdpMode
	dense, moeLayer params
	run             Run
}

// fsdpMode is what Megatron-FSDP shards layer by layer.
type fsdpMode struct{ grads, params bool }

// tokens is a rank's tokens of one micro-batch (s/cp·b), and r the share
// of them a rank's replicated regions hold (1/t under sequence
// parallelism).
func (c costModel) tokens() float64 {
	return float64(c.cfg.SeqLength) / float64(c.l.cp) * c.b
}

func (c costModel) replicated() float64 {
	if c.cfg.SequenceParallel && c.l.tp > 1 {
		return 1 / float64(c.l.tp)
	}
	return 1
}

// layer is one decoder layer's phases for one micro-batch on one rank
// (docs/PLAN.md, § A layer): its attention block, then its MLP block, or
// under MoE its experts' block; full recompute adds the whole forward to
// the backward, selective recompute the attention core's.
func (c costModel) layer(moe, recompute bool) phases {
	cfg := c.cfg
	core := c.attentionCore()
	p := c.block(c.attentionGEMMs())
	p.F.Compute += core + c.norms()
	p.B.Compute += 2*core + 2*c.norms()
	cpF, cpB := c.contextParallel(core)
	p.F.CP, p.B.CP = cpF, cpB
	if g := c.latentGather(); g > 0 {
		p.F.TP += g
		p.B.TP += g
	}
	switch {
	case moe:
		p = p.plus(c.experts())
	default:
		p = p.plus(c.mlp(float64(cfg.FC1Width()), float64(cfg.FFN())))
	}
	switch {
	case recompute && cfg.RecomputeGranularity == "full":
		p.B = p.B.plus(p.F)
	case cfg.RecomputeGranularity == "selective":
		p.B.Compute += core
	}
	n := c.dense
	if moe {
		n = c.moeLayer
	}
	return c.sharded(p, n)
}

// sharded adds a layer's Megatron-FSDP communication to its phases: for
// every micro-batch, under optim_grads_params the all-gather of its
// parameters before its forward, behind the previous layer's forward, and
// again before its backward; under both sharding strategies the
// reduce-scatter of its gradients after its backward; each behind the
// layer's own computation (the prefetch and the overlapped reduction of
// dp.FSDP), only the excess exposed. Dense parameters cross the data- and
// context-parallel group, routed experts' the expert data-parallel one.
func (c costModel) sharded(p phases, n params) phases {
	if !c.fsdp.grads {
		return p
	}
	w, g, _ := c.bytes()
	l, d := c.l, c.d
	gather := d.allGather(n.dense*w, l.dpcp(), l.dpLink) + d.allGather(n.experts*w, l.edp, l.edpLink)
	reduce := d.allGather(n.dense*g, l.dpcp(), l.dpLink) + d.allGather(n.experts*g, l.edp, l.edpLink)
	back := reduce
	if c.fsdp.params {
		p.F.DP = max(0, gather-p.F.Compute)
		back += gather
	}
	p.B.DP = max(0, back-p.B.Compute-p.W.Compute)
	return p
}

// bytes is a parameter's bytes of weights, gradients and optimizer state
// (Run.parameterBytes), as costModel knows the run.
func (c costModel) bytes() (w, g, o float64) { return c.run.parameterBytes() }

// attentionGEMMs are the attention block's linear layers as block takes
// them: linear_qkv, or under multi-latent attention its projections (the
// down projections of the queries, when they have a latent, and of the
// keys and values, each split over the tensor-parallel ranks and
// gathered, then the up projections), and linear_proj.
func (c costModel) attentionGEMMs() (col, row, colW, rowW, colB float64) {
	cfg, d, t := c.cfg, c.d, float64(c.l.tp)
	T, h := c.tokens(), float64(cfg.HiddenSize)
	nd := float64(cfg.AttentionWidth())
	var shapes [][2]float64 // in, out of each column-parallel linear
	if cfg.MultiLatentAttention {
		a, n := cfg.MLA, float64(cfg.NumAttentionHeads)
		qd, kv := float64(a.MLAQHeadDim()), float64(a.KVLoRARank)
		if q := float64(a.QLoRARank); q > 0 {
			shapes = append(shapes, [2]float64{h, q}, [2]float64{q, n * qd})
		} else {
			shapes = append(shapes, [2]float64{h, n * qd})
		}
		shapes = append(shapes, [2]float64{h, kv + float64(a.QKPosEmbHeadDim)}, [2]float64{kv, n * float64(a.QKHeadDim+a.VHeadDim)})
		nd = n * float64(a.VHeadDim)
	} else {
		shapes = append(shapes, [2]float64{h, float64(cfg.QKVWidth())})
	}
	for _, s := range shapes {
		col += d.gemm(T, s[1]/t, s[0])
		colW += d.gemm(s[1]/t, s[0], T)
		colB += d.gemm(T, s[0], s[1]/t)
	}
	return col, d.gemm(T, h, nd/t), colW, d.gemm(h, nd/t, T), colB
}

// latentGather is multi-latent attention's gather of its down
// projections' outputs over the tensor-parallel ranks (the latents of the
// queries, when they have one, and of the keys and values with their
// rotary channels), forward; its backward reduces the same bytes.
func (c costModel) latentGather() float64 {
	cfg := c.cfg
	if !cfg.MultiLatentAttention || c.l.tp < 2 {
		return 0
	}
	a := cfg.MLA
	width := float64(a.QLoRARank + a.KVLoRARank + a.QKPosEmbHeadDim)
	return c.d.allGather(c.tokens()*width*c.d.elem, c.l.tp, c.l.tpLink)
}

// mlp is a dense MLP block of widths f₁ (linear_fc1's output) and f on a
// rank: its two GEMMs, the activation between them, and its
// tensor-parallel communication.
func (c costModel) mlp(f1, f float64) phases {
	d, t, T, h := c.d, float64(c.l.tp), c.tokens(), float64(c.cfg.HiddenSize)
	p := c.block(d.gemm(T, f1/t, h), d.gemm(T, h, f/t), d.gemm(f1/t, h, T), d.gemm(h, f/t, T), d.gemm(T, h, f1/t))
	act := d.memory(T * (f1 + f) * d.elem / t)
	p.F.Compute += act
	p.B.Compute += 2 * act
	return p
}

// block is an attention or MLP block's GEMMs and tensor-parallel
// communication, from its column-parallel linear's forward col, its
// row-parallel linear's forward row, their weight gradients colW and
// rowW, and the column linear's input-gradient GEMM colB (what hides an
// all-gather). With S = s/cp·b·h activations' bytes: without sequence
// parallelism an all-reduce forward (after the row linear), exposed, and
// one backward (of the column linear's input gradient) that Megatron
// overlaps with that linear's weight-gradient GEMM; with it an all-gather
// and a reduce-scatter forward, and backward an all-gather exposed (the
// row linear's output gradient), one behind the column linear's
// input-gradient GEMM (its input again) and a reduce-scatter behind its
// weight-gradient GEMM. What a GEMM cannot hide is exposed; with a split
// backward the weight-gradient GEMMs run later and hide nothing.
func (c costModel) block(col, row, colW, rowW, colB float64) phases {
	p := phases{F: work{Compute: col + row}, B: work{Compute: col + row}, W: work{Compute: colW + rowW}}
	if c.l.tp < 2 {
		return p
	}
	S := c.tokens() * float64(c.cfg.HiddenSize) * c.d.elem
	n, l := c.l.tp, c.l.tpLink
	hideW := colW
	if c.split {
		hideW = 0
	}
	if !c.cfg.SequenceParallel {
		ar := c.d.allReduce(S, n, l)
		p.F.TP, p.B.TP = ar, max(0, ar-hideW)
		return p
	}
	ag := c.d.allGather(S, n, l)
	p.F.TP, p.B.TP = 2*ag, ag+max(0, ag-colB)+max(0, ag-hideW)
	return p
}

// norms is a layer's forward traffic outside its GEMMs and attention
// core: the two norms (read and write) and the two bias-dropout-adds (the
// output, the residual and the result, a byte of mask with dropout).
func (c costModel) norms() float64 {
	d, T, h, r := c.d, c.tokens(), float64(c.cfg.HiddenSize), c.replicated()
	add := 3 * d.elem
	if c.cfg.HiddenDropout > 0 {
		add++
	}
	return d.memory(r * T * h * (2*2*d.elem + 2*add))
}

// experts is a MoE layer's block in place of the MLP (docs/PLAN.md, §
// Experts): the router's GEMM over the rank's r·T tokens, the k·r·T rows
// it routes dispatched to the experts and combined back (dispatch), the
// rank's E/ep experts each running the rows the balanced routing gives it
// (N = k·r·T·etp rows in all, split evenly, at widths f₁/etp and f/etp),
// their permutation and activation through memory, and the shared
// experts, a dense MLP block of their width.
func (c costModel) experts() phases {
	cfg, d := c.cfg, c.d
	h, e := float64(cfg.HiddenSize), float64(cfg.NumMoEExperts)
	ep, etp := float64(c.l.ep), float64(c.l.etp)
	tok := c.tokens() * c.replicated()
	routed := c.routedRows(tok)
	rows := routed * etp
	local := e / ep
	perExpert := rows / local
	f1, f := float64(cfg.MoEFFN()), float64(cfg.MoEFFN())
	if cfg.GatedLinearUnit {
		f1 *= 2
	}
	fc := local * (d.gemm(perExpert, f1/etp, h) + d.gemm(perExpert, h, f/etp))
	fcW := local * (d.gemm(f1/etp, h, perExpert) + d.gemm(h, f/etp, perExpert))
	router := d.gemm(tok, e, h)
	moved := d.memory(4*routed*h*d.elem + rows*(f1+f)/etp*d.elem)
	disp := c.dispatch(tok, routed)
	p := phases{
		F: work{Compute: router + fc + moved, EP: disp},
		B: work{Compute: router + fc + 2*moved, EP: disp},
		W: work{Compute: d.gemm(e, h, tok) + fcW},
	}
	if fs := float64(cfg.MoESharedExpertIntermediateSize); fs > 0 {
		fs1 := fs
		if cfg.GatedLinearUnit {
			fs1 *= 2
		}
		p = p.plus(c.mlp(fs1, fs))
	}
	return p
}

// routedRows is the rows a rank's router sends out for tok tokens:
// k·tok, or under capacity dropping (c = moe.Capacity(k·tok, E, factor))
// E·min(c, tok) padded to capacity, else at most E·c — the balanced
// routing's count, as gpt's activation formula takes it.
func (c costModel) routedRows(tok float64) float64 {
	cfg := c.cfg
	e, k := cfg.NumMoEExperts, float64(cfg.MoERouterTopK)
	f := cfg.MoEExpertCapacityFactor
	if f <= 0 {
		return k * tok
	}
	capacity := float64(moe.Capacity(int(k*tok), e, f))
	if cfg.MoEPadExpertInputToCapacity {
		return float64(e) * min(capacity, tok)
	}
	return min(k*tok, float64(e)*capacity)
}

// dispatch is one direction's token exchange of a MoE layer for a rank's
// tok tokens, routed of them rows sent out, forward (backward moves the
// gradients the same way): with the all-to-all dispatcher the routed rows
// go to their experts' ranks and come back, (ep−1)/ep of them across the
// expert-parallel group each way, and under expert tensor parallelism are
// all-gathered over it and reduce-scattered back; with the all-gather
// dispatcher every rank of the etp·ep group (moe.Parallel's TPEP)
// gathers the group's tokens and reduce-scatters the experts' output
// back, and a group of one exchanges nothing.
func (c costModel) dispatch(tok, routed float64) float64 {
	d, h := c.d, float64(c.cfg.HiddenSize)
	l := c.l
	if c.cfg.MoETokenDispatcherType == "alltoall" {
		rows := routed * h * d.elem
		t := 2 * d.allToAll(rows, l.ep, l.epLink)
		if l.etp > 1 {
			t += 2 * d.allGather(rows*float64(l.etp), l.etp, l.etpLink)
		}
		return t
	}
	n := l.etp * l.ep
	if n < 2 {
		return 0
	}
	return 2 * d.allGather(tok*h*d.elem*float64(n), n, l.link(n, 1))
}

// attentionCore is the attention core's forward on a rank: a/t heads,
// each QKᵀ and PV products of its s/cp queries against all s keys (half
// of them with flash attention's causal skipping), and, without flash
// attention, the scale, mask, softmax and dropout of the a·b·s²/(t·cp)
// scores through memory.
func (c costModel) attentionCore() float64 {
	cfg, d := c.cfg, c.d
	heads := float64(cfg.NumAttentionHeads) / float64(c.l.tp) * c.b
	sq, sk, qd, vd := float64(cfg.SeqLength)/float64(c.l.cp), float64(cfg.SeqLength), float64(cfg.HeadDim()), float64(cfg.HeadDim())
	if cfg.MultiLatentAttention {
		qd, vd = float64(cfg.MLA.MLAQHeadDim()), float64(cfg.MLA.VHeadDim)
	}
	gemms := heads * (d.gemm(sq, sk, qd) + d.gemm(sq, vd, sk))
	if c.flash {
		return gemms / 2
	}
	scores := heads * sq * sk
	bytes := 2 * d.elem * scores // scale, mask and softmax fused: read and write
	if cfg.AttentionDropout > 0 {
		bytes += (2*d.elem + 1) * scores
	}
	return gemms + d.memory(bytes)
}

// contextParallel is a layer's exposed context-parallel communication:
// the ring passes each rank's keys and values (2·s/cp·b·g·d/t elements)
// cp−1 times forward, and backward those and their gradients, behind the
// attention core's blocks.
func (c costModel) contextParallel(core float64) (fwd, bwd float64) {
	if c.l.cp < 2 {
		return 0, 0
	}
	cfg := c.cfg
	kv := 2 * c.tokens() * float64(cfg.QueryGroups()*cfg.HeadDim()) / float64(c.l.tp) * c.d.elem
	if cfg.MultiLatentAttention { // per head: keys of q_d channels, values of v_d
		n := float64(cfg.NumAttentionHeads)
		kv = c.tokens() * n * float64(cfg.MLA.MLAQHeadDim()+cfg.MLA.VHeadDim) / float64(c.l.tp) * c.d.elem
	}
	pass := float64(c.l.cp-1) * c.d.message(kv, c.l.cpLink)
	return max(0, pass-core), max(0, 2*pass-2*core)
}

// embedding is the first chunk's embedding: the lookup (and the
// positions' add) through memory, the vocabulary-parallel output's
// all-reduce (a reduce-scatter under sequence parallelism), and the
// weight gradient's scatter-add.
func (c costModel) embedding() phases {
	T, h := c.tokens(), float64(c.cfg.HiddenSize)
	S := T * h * c.d.elem
	var tp float64
	switch {
	case c.l.tp < 2:
	case c.cfg.SequenceParallel:
		tp = c.d.allGather(S, c.l.tp, c.l.tpLink)
	default:
		tp = c.d.allReduce(S, c.l.tp, c.l.tpLink)
	}
	return phases{F: work{Compute: c.d.memory(3 * S), TP: tp}, W: work{Compute: c.d.memory(2 * S)}}
}

// head is the last chunk's final norm, output layer and loss: the norm
// through memory, the output GEMM (and its input's all-gather under
// sequence parallelism), and the loss over the float32 logits.
func (c costModel) head() phases {
	cfg, d, t := c.cfg, c.d, float64(c.l.tp)
	T, h, v := c.tokens(), float64(cfg.HiddenSize), float64(cfg.PaddedVocabSize())
	S := T * h * d.elem
	norm := d.memory(2 * S * c.replicated())
	out := d.gemm(T, v/t, h)
	logits := T * v / t
	loss := d.memory(logits * (d.elem + 3*4))
	var fwd, bwd float64
	switch {
	case c.l.tp < 2:
	case cfg.SequenceParallel:
		fwd, bwd = d.allGather(S, c.l.tp, c.l.tpLink), d.allGather(S, c.l.tp, c.l.tpLink)
	default:
		bwd = max(0, d.allReduce(S, c.l.tp, c.l.tpLink)-d.gemm(v/t, h, T))
	}
	return phases{
		F: work{Compute: norm + out + loss, TP: fwd},
		B: work{Compute: 2*norm + d.gemm(T, h, v/t) + d.memory(logits*(2*4+d.elem)), TP: bwd},
		W: work{Compute: d.gemm(v/t, h, T)},
	}
}

// chunk is a model chunk's phases for one micro-batch: its layers (MoE or
// dense, the recomputed ones with their forward again), and its
// embedding and head.
func (c costModel) chunk(ch config.PipelineChunk) phases {
	var p phases
	var priced [2][2]*phases // [moe][recomputed]
	for i := range ch.NumLayers {
		moe, again := c.cfg.IsMoELayer(ch.LayerOffset+i), c.recomputes(i)
		m, r := b2i(moe), b2i(again)
		if priced[m][r] == nil {
			x := c.layer(moe, again)
			priced[m][r] = &x
		}
		p = p.plus(*priced[m][r])
	}
	if ch.PreProcess {
		p = p.plus(c.embedding())
	}
	if ch.PostProcess {
		p = p.plus(c.head())
	}
	for range ch.MTPLayers {
		p = p.plus(c.mtpDepth())
	}
	for range c.mtpHeads(ch) {
		p = p.plus(c.head())
	}
	return p
}

// mtpHeads is how many MTP depths' heads a chunk runs: the loss chunk runs
// every depth's output layer and loss, the depths' own chunk or an
// earlier one (a standalone MTP stage only passes their hidden states on,
// models/gpt's forward).
func (c costModel) mtpHeads(ch config.PipelineChunk) int {
	if ch.PostProcess {
		return c.cfg.MTPNumLayers
	}
	return 0
}

// mtpDepth is one multi-token-prediction depth without its head: the
// shifted tokens' embedding, eh_proj's GEMM over the two normed inputs
// (2h → h, column parallel, its output gathered over the tensor-parallel
// ranks) and a decoder layer (MoE when the decoder's last is, recomputed
// as the decoder's first under full recompute).
func (c costModel) mtpDepth() phases {
	d, t, T, h := c.d, float64(c.l.tp), c.tokens(), float64(c.cfg.HiddenSize)
	proj := phases{F: work{Compute: d.gemm(T, h/t, 2*h)}, B: work{Compute: d.gemm(T, 2*h, h/t)}, W: work{Compute: d.gemm(h/t, 2*h, T)}}
	if c.l.tp > 1 {
		g := d.allGather(T*h*d.elem, c.l.tp, c.l.tpLink)
		proj.F.TP, proj.B.TP = g, g
	}
	return c.embedding().plus(proj).plus(c.layer(c.cfg.IsMoELayer(c.cfg.NumLayers-1), c.recomputes(0)))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// recomputes says whether full recompute recomputes the chunk's i-th
// layer: every layer under the uniform method, the first
// recompute_num_layers under the block method.
func (c costModel) recomputes(i int) bool {
	switch {
	case c.cfg.RecomputeGranularity != "full":
		return false
	case c.cfg.RecomputeMethod == "block":
		return i < c.cfg.RecomputeNumLayers
	}
	return true
}
