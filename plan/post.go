package plan

import (
	"cmp"
	"slices"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
)

// postPipeline prices what an iteration does beside and after the
// pipeline: the data-parallel reduction, the tied embedding's all-reduce,
// the optimizer's step, and each rank's memory.
type postPipeline struct {
	a      Run
	c      costModel
	chunks [][]config.PipelineChunk
	params [][]params // each chunk's parameters on one of its ranks
	st     stateShare
}

func newPostPipeline(a Run, c costModel, chunks [][]config.PipelineChunk, world int) postPipeline {
	p := postPipeline{a: a, c: c, chunks: chunks, st: machineShare(a, world, 1)}
	for _, row := range chunks {
		var ps []params
		for _, ch := range row {
			ps = append(ps, chunkParameters(a.Model, ch))
		}
		p.params = append(p.params, ps)
	}
	return p
}

// rankParameters is pipeline rank r's parameters (one of its ranks').
func (p postPipeline) rankParameters(r int) params {
	var n params
	for _, x := range p.params[r] {
		n = n.plus(x)
	}
	return n
}

// reduce is the data-parallel time of a chunk's parameters: the dense
// ones' over the data- and context-parallel group (reduceDense), then the
// routed experts' over the expert data-parallel group (an all-reduce, or
// a reduce-scatter and after the step an all-gather).
func (p postPipeline) reduce(n params) (reduce, gather float64) {
	reduce, gather = p.reduceDense(n.dense)
	l, d := p.c.l, p.c.d
	if n.experts == 0 || l.edp < 2 {
		return reduce, gather
	}
	w, g, _ := p.a.parameterBytes()
	if !p.a.DDP.UseDistributedOptimizer {
		return reduce + d.allReduce(n.experts*g, l.edp, l.edpLink), gather
	}
	return reduce + d.allGather(n.experts*g, l.edp, l.edpLink), gather + d.allGather(n.experts*w, l.edp, l.edpLink)
}

// reduceDense is the data-parallel time of n dense parameters over the
// data- and context-parallel group (dp·cp ranks): an all-reduce of their
// gradients, or under the distributed optimizer a reduce-scatter, and
// gather the all-gather of the updated parameters that follows the step.
// With several optimizer instances the reduce-scatter and the gather run
// within an instance's dp·cp/N ranks, and the shards are all-reduced
// across the N instances.
func (p postPipeline) reduceDense(n float64) (reduce, gather float64) {
	l, d := p.c.l, p.c.d
	if l.dpcp() < 2 {
		return 0, 0
	}
	w, g, _ := p.a.parameterBytes()
	if !p.a.DDP.UseDistributedOptimizer {
		return d.allReduce(n*g, l.dpcp(), l.dpLink), 0
	}
	inst := max(p.a.DDP.NumDistributedOptimizerInstances, 1)
	within := max(l.dpcp()/inst, 1)
	if inst == 1 || within == l.dpcp() {
		return d.allGather(n*g, l.dpcp(), l.dpLink), d.allGather(n*w, l.dpcp(), l.dpLink)
	}
	in := l.link(l.tp*within, l.tp)
	return d.allGather(n*g, within, in) + d.allReduce(n*g/float64(within), inst, l.dpLink), d.allGather(n*w, within, in)
}

// dataParallel is the data-parallel communication the pipeline leaves
// exposed (sim's times in milliseconds; the result in seconds). Each
// rank's chunks reduce one after the other on the rank's communication
// stream, in the order their gradients are complete: after the rank's
// last computation, or with --overlap-grad-reduce from the start of the
// chunk's last gradient computation (its last backward, or its last
// weight-gradient step when the schedule splits them), and ending no
// earlier than a bucket's reduction after it. The step waits for every
// rank; the parameters' all-gather follows it unless
// --overlap-param-gather hides it behind the next forward.
func (p postPipeline) dataParallel(sim *pp.Simulation) float64 {
	end := 0.0 // sim.End, in the spans' rounding
	for _, spans := range sim.Timeline.Ranks {
		for _, s := range spans {
			end = max(end, float64(s.End)/1e9)
		}
	}
	var worst, gatherWorst float64
	for r, spans := range sim.Timeline.Ranks {
		last := 0.0
		for _, s := range spans {
			last = max(last, float64(s.End)/1e9)
		}
		type ready struct {
			v        int
			from, to float64
		}
		var order []ready
		for v := range p.params[r] {
			from, to := last, last
			if p.a.DDP.OverlapGradReduce {
				from, to = lastGradient(spans, v)
			}
			order = append(order, ready{v, from, to})
		}
		slices.SortStableFunc(order, func(a, b ready) int { return cmp.Compare(a.from, b.from) })
		stream, finish, gathers := 0.0, last, 0.0
		for _, c := range order {
			n := p.afterPipeline(r, c.v)
			red, _ := p.reduce(n)
			_, gat := p.reduce(p.afterStep(r, c.v))
			gathers += gat
			stream = max(stream, c.from) + red
			finish = max(finish, stream, c.to+red/p.buckets(n.dense+n.experts))
		}
		worst = max(worst, finish-end)
		gatherWorst = max(gatherWorst, gathers)
	}
	if p.a.DDP.OverlapParamGather {
		gatherWorst = 0
	}
	return max(0, worst) + gatherWorst
}

// afterPipeline is what of chunk v of rank r the pipeline leaves to
// reduce: all its parameters, or under Megatron-FSDP's sharded
// strategies, which reduce each unit's gradients as its backward ends
// (the decoder layers and the MTP depths), those outside them (the
// embedding, the head).
func (p postPipeline) afterPipeline(r, v int) params {
	if !p.a.DDP.ShardsGradients() {
		return p.params[r][v]
	}
	ch := p.chunks[r][v]
	depths := float64(ch.MTPLayers)
	ch.NumLayers = 0
	n := chunkParameters(p.a.Model, ch) // the embedding (and its copies), the head, the depths
	cfg := p.a.Model
	dense, moe := layerShares(cfg)
	unit := dense
	if cfg.IsMoELayer(cfg.NumLayers - 1) {
		unit = moe
	}
	h := float64(cfg.HiddenSize)
	n.dense -= depths * (unit.dense + 2*h*h/float64(max(cfg.TensorModelParallelSize, 1)))
	n.experts -= depths * unit.experts
	return n
}

// afterStep is what of chunk v of rank r the step's all-gather brings
// back (under the distributed optimizer): all its parameters, or under
// optim_grads_params, whose layers gather their parameters before each
// use, those outside the decoder layers.
func (p postPipeline) afterStep(r, v int) params {
	if !p.a.DDP.ShardsParameters() {
		return p.params[r][v]
	}
	return p.afterPipeline(r, v)
}

// buckets is how many gradient buckets a chunk of n parameters has:
// --ddp-num-buckets, or n over --ddp-bucket-size (Megatron's default
// max(4·10⁷, 10⁶·dp·cp) elements), at least one.
func (p postPipeline) buckets(n float64) float64 {
	if k := p.a.DDP.NumBuckets; k > 0 {
		return float64(k)
	}
	size := float64(p.a.DDP.BucketSize)
	if size <= 0 {
		size = max(4e7, 1e6*float64(p.c.l.dpcp()))
	}
	return max(1, n/size)
}

// lastGradient is when the last computation of chunk v's gradients on a
// rank (a backward, or a split backward's weight gradients) starts and
// ends, in seconds.
func lastGradient(spans []pp.Span, v int) (start, end float64) {
	for _, s := range spans {
		if (s.Kind == pp.Backward || s.Kind == pp.WeightGrad) && s.Chunk == v && float64(s.End)/1e9 >= end {
			start, end = float64(s.Start)/1e9, float64(s.End)/1e9
		}
	}
	return start, end
}

// embeddingSync is the all-reduce of the word embedding's gradients
// between the stages that hold a copy (a tied output layer on the last
// stage), after the pipeline.
func (p postPipeline) embeddingSync() float64 {
	cfg, l := p.a.Model, p.c.l
	ranks := len(p.embeddingRanks())
	if !cfg.WordEmbeddingShared() || ranks < 2 {
		return 0
	}
	_, g, _ := p.a.parameterBytes()
	link := p.c.d.hw.InterNode
	if l.tp*l.cp*l.dp*l.pp <= p.c.d.hw.DevicesPerNode {
		link = p.c.d.hw.IntraNode
	}
	n := float64(cfg.PaddedVocabSize()) * float64(cfg.HiddenSize) / float64(l.tp)
	return p.c.d.allReduce(n*g, ranks, link)
}

// embeddingRanks are the pipeline ranks holding the word embedding or a
// copy (one under the V placement, where rank 0 holds the first and the
// last stage).
func (p postPipeline) embeddingRanks() []int {
	var out []int
	for r, row := range p.chunks {
		for _, ch := range row {
			if ch.HoldsWordEmbedding(p.a.Model.ShareEmbeddingsAndOutputWeights) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// optimizer is the step of the rank with the most parameters: per
// parameter of its shard, the gradient read twice (the norm and the
// step), the main parameter read and written, each moment read and
// written, and a 16-bit model's parameter written.
func (p postPipeline) optimizer() float64 {
	most := 0.0
	ds, es := p.st.optimizerShards(p.a)
	for r := range p.params {
		n := p.rankParameters(r)
		most = max(most, n.dense/ds+n.experts/es)
	}
	bytes := 8 + 8 + 8*p.a.moments()
	if p.a.Model.BF16 || p.a.Model.FP16 {
		bytes += 2
	}
	return p.c.d.memory(most * bytes)
}

// rank is pipeline rank r's plan: its memory and its time.
func (p postPipeline) rank(r int, chunks []config.PipelineChunk, inFlight int, sim *pp.Simulation, hw Hardware) RankPlan {
	w, g, o := rankState(p.a, p.st, p.rankParameters(r))
	var act float64
	layers := 0
	for _, ch := range chunks {
		act += p.chunkActivations(ch)
		layers += ch.NumLayers
	}
	act = act / float64(len(chunks)) * float64(inFlight)
	m := RankMemory{Weights: w, Gradients: g, Optimizer: o, Activations: act}
	total := m.Weights + m.Gradients + m.Optimizer + m.Activations
	busy := sim.Busy[r] / 1e3
	return RankPlan{PipelineRank: r, Layers: layers, Memory: m, MemoryBytes: total, Fits: total <= hw.MemoryGiB*(1<<30),
		InFlight: inFlight, BusySeconds: busy, IdleFraction: sim.Idle[r]}
}

// rankState is the weights, gradients and optimizer state of a rank
// holding n parameters (params.bytes); under Megatron-FSDP's sharded
// strategies the weights and gradients are the up-front check's
// (fsdpState), the average rank's in the proportion of n.
func rankState(a Run, st stateShare, n params) (w, g, o float64) {
	w, g, o = n.bytes(a, st)
	if a.DDP.ShardsGradients() {
		avg := st.modelState(a)
		share := (n.dense + n.experts) / (st.dense*st.copies + st.experts*st.ecopies)
		w, g = avg.Weights*share, avg.Gradients*share
	}
	return w, g, o
}

// chunkActivations is what one micro-batch leaves on a chunk's rank for
// backward: gpt.EstimateActivationsAt at the device's element size for
// each of its layers (dense or MoE; the first recompute_num_layers
// checkpointed under block recompute, the others whole), its embedding
// and its head; without flash attention a layer not selectively
// recomputed also keeps its probabilities, their dropout mask and dropped
// output (Korthikanti et al. 2022's 5·a·s²·b/t bytes in 16 bits).
func (p postPipeline) chunkActivations(ch config.PipelineChunk) float64 {
	cfg, b := p.a.Model, p.a.MicroBatchSize
	x := int64(p.c.d.elem)
	e, whole := gpt.EstimateActivationsAt(cfg, b, x), gpt.EstimateActivationsAt(cfg, b, x)
	block := cfg.RecomputeGranularity == "full" && cfg.RecomputeMethod == "block"
	if block {
		plain := cfg
		plain.Recompute = config.Recompute{}
		whole = gpt.EstimateActivationsAt(plain, b, x)
	}
	var layers float64
	for i := range ch.NumLayers {
		l := ch.LayerOffset + i
		switch {
		case block && i >= cfg.RecomputeNumLayers:
			layers += float64(whole.Layer(cfg, l))
			if !p.c.flash {
				layers += p.scores()
			}
		default:
			layers += float64(e.Layer(cfg, l))
			if !p.c.flash && cfg.RecomputeGranularity == "" {
				layers += p.scores()
			}
		}
	}
	if ch.PreProcess {
		layers += float64(e.Embedding)
	}
	if ch.PostProcess {
		layers += float64(e.Head)
	}
	// A depth's activations without its head, which the loss chunk keeps.
	layers += float64(ch.MTPLayers) * float64(e.MTP-e.Head)
	layers += float64(p.c.mtpHeads(ch)) * float64(e.Head)
	return layers
}

// scores is a layer's attention probabilities kept for backward without
// flash attention: the softmax's output, and with attention dropout its
// mask (a byte) and output, for the rank's a/t heads and s/cp queries.
func (p postPipeline) scores() float64 {
	cfg, l, x := p.a.Model, p.c.l, p.c.d.elem
	n := float64(cfg.NumAttentionHeads) / float64(l.tp) * float64(p.a.MicroBatchSize) *
		float64(cfg.SeqLength) / float64(l.cp) * float64(cfg.SeqLength)
	if cfg.AttentionDropout > 0 {
		return n * (2*x + 1)
	}
	return n * x
}
