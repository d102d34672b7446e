package plan

import (
	"github.com/gotron/gotron/config"
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

// message is a point-to-point message's time.
func (d device) message(bytes float64, l Link) float64 {
	return bytes/(l.BusBandwidthGBs*1e9*d.hw.Efficiency.Collective) + l.LatencyUS*1e-6
}

// work is a stretch of one rank's time by what it waits on: its own
// kernels, and the tensor- and context-parallel communication they
// cannot hide.
type work struct {
	Compute, TP, CP float64
}

func (w work) total() float64 { return w.Compute + w.TP + w.CP }

func (w work) plus(o work) work { return work{w.Compute + o.Compute, w.TP + o.TP, w.CP + o.CP} }

// phases are one micro-batch's forward F, input-gradient backward B and
// weight-gradient W on a model chunk.
type phases struct{ F, B, W work }

func (p phases) plus(o phases) phases { return phases{p.F.plus(o.F), p.B.plus(o.B), p.W.plus(o.W)} }

// layout is where a run's ranks sit: the sizes and links of its groups.
type layout struct {
	hw             Hardware
	tp, cp, dp, pp int
	// tpLink, cpLink, dpLink and ppLink are the links each group's
	// collectives cross (link): the tensor-parallel group, the
	// context-parallel group, the data- and context-parallel group of the
	// gradients' reduction, and a pipeline stage's next.
	tpLink, cpLink, dpLink, ppLink Link
}

func newLayout(hw Hardware, tp, cp, dp, pp int) layout {
	l := layout{hw: hw, tp: tp, cp: cp, dp: dp, pp: pp}
	l.tpLink, l.cpLink, l.dpLink = l.link(tp, 1), l.link(tp*cp, tp), l.link(tp*cp*dp, tp)
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
	// flash says the attention core is flash attention (Run.FlashAttention).
	flash bool
}

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

// layer is one dense decoder layer's phases for one micro-batch on one
// rank (docs/PLAN.md, § A layer).
func (c costModel) layer(recompute bool) phases {
	cfg, d, t := c.cfg, c.d, float64(c.l.tp)
	T, h := c.tokens(), float64(cfg.HiddenSize)
	qkv, nd, f1, f := float64(cfg.QKVWidth()), float64(cfg.AttentionWidth()), float64(cfg.FC1Width()), float64(cfg.FFN())
	// The four linear layers: forward, and the same shapes again for the
	// input and for the weight gradients.
	lin := d.gemm(T, qkv/t, h) + d.gemm(T, h, nd/t) + d.gemm(T, f1/t, h) + d.gemm(T, h, f/t)
	wgrad := d.gemm(qkv/t, h, T) + d.gemm(h, nd/t, T) + d.gemm(f1/t, h, T) + d.gemm(h, f/t, T)
	core := c.attentionCore()
	ew := c.elementwise()
	tp := c.tensorParallel(wgrad)
	cpF, cpB := c.contextParallel(core)
	p := phases{
		F: work{Compute: lin + core + ew, TP: tp.fwd, CP: cpF},
		B: work{Compute: lin + 2*core + 2*ew, TP: tp.bwd, CP: cpB},
		W: work{Compute: wgrad},
	}
	switch {
	case recompute && cfg.RecomputeGranularity == "full":
		p.B = p.B.plus(p.F)
	case cfg.RecomputeGranularity == "selective":
		p.B.Compute += core
	}
	return p
}

// attentionCore is the attention core's forward on a rank: a/t heads,
// each QKᵀ and PV products of its s/cp queries against all s keys (half
// of them with flash attention's causal skipping), and, without flash
// attention, the scale, mask, softmax and dropout of the a·b·s²/(t·cp)
// scores through memory.
func (c costModel) attentionCore() float64 {
	cfg, d := c.cfg, c.d
	heads := float64(cfg.NumAttentionHeads) / float64(c.l.tp) * c.b
	sq, sk, hd := float64(cfg.SeqLength)/float64(c.l.cp), float64(cfg.SeqLength), float64(cfg.HeadDim())
	gemms := heads * (d.gemm(sq, sk, hd) + d.gemm(sq, hd, sk))
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

// elementwise is a layer's forward traffic outside the GEMMs: the two
// norms (read and write), the two bias-dropout-adds (the output, the
// residual and the result, a byte of mask with dropout), and the
// activation (fc1's output in, fc2's input out).
func (c costModel) elementwise() float64 {
	cfg, d := c.cfg, c.d
	T, h, r, t := c.tokens(), float64(cfg.HiddenSize), c.replicated(), float64(c.l.tp)
	add := 3 * d.elem
	if cfg.HiddenDropout > 0 {
		add++
	}
	bytes := r*T*h*(2*2*d.elem+2*add) + T*(float64(cfg.FC1Width())+float64(cfg.FFN()))*d.elem/t
	return d.memory(bytes)
}

// tpComm is a layer's exposed tensor-parallel communication, forward and
// backward.
type tpComm struct{ fwd, bwd float64 }

// tensorParallel is a layer's tensor-parallel communication of its
// s/cp·b·h activations, S bytes: without sequence parallelism, two
// all-reduces forward (after linear_proj and linear_fc2) and two backward
// (of linear_qkv's and linear_fc1's input gradients) that Megatron
// overlaps with the weight-gradient GEMMs; with it, two all-gathers and
// two reduce-scatters forward, and backward two all-gathers (the row
// linears' output gradients), two all-gathers of the column linears'
// inputs hidden behind the input-gradient GEMMs and two reduce-scatters
// behind the weight-gradient ones. What a GEMM cannot hide is exposed;
// with a split backward the weight-gradient GEMMs run later and hide
// nothing.
func (c costModel) tensorParallel(wgrad float64) tpComm {
	if c.l.tp < 2 {
		return tpComm{}
	}
	S := c.tokens() * float64(c.cfg.HiddenSize) * c.d.elem
	n, l := c.l.tp, c.l.tpLink
	hideW := wgrad
	if c.split {
		hideW = 0
	}
	if !c.cfg.SequenceParallel {
		ar := c.d.allReduce(S, n, l)
		return tpComm{fwd: 2 * ar, bwd: max(0, 2*ar-hideW)}
	}
	ag := c.d.allGather(S, n, l)
	// The input-gradient GEMMs of linear_qkv and linear_fc1 hide the
	// inputs' all-gathers: about half of the layer's input-gradient GEMMs.
	t, T, h := float64(c.l.tp), c.tokens(), float64(c.cfg.HiddenSize)
	hideB := c.d.gemm(T, h, float64(c.cfg.QKVWidth())/t) + c.d.gemm(T, h, float64(c.cfg.FC1Width())/t)
	return tpComm{fwd: 4 * ag, bwd: 2*ag + max(0, 2*ag-hideB) + max(0, 2*ag-hideW)}
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

// chunk is a model chunk's phases for one micro-batch: its layers (the
// recomputed ones with their forward again), and its embedding and head.
func (c costModel) chunk(ch config.PipelineChunk) phases {
	var p phases
	plain, again := c.layer(false), c.layer(true)
	for i := range ch.NumLayers {
		if c.recomputes(i) {
			p = p.plus(again)
		} else {
			p = p.plus(plain)
		}
	}
	if ch.PreProcess {
		p = p.plus(c.embedding())
	}
	if ch.PostProcess {
		p = p.plus(c.head())
	}
	return p
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
