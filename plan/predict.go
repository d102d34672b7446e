package plan

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
)

// Prediction is what Predict says of one iteration of a run: its time
// and where it goes, its speed, and each pipeline rank's memory. The
// ranks of a pipeline stage (its tensor-, context- and data-parallel
// ranks) do the same work and hold the same memory, so one is given per
// stage.
type Prediction struct {
	Hardware string `json:"hardware"`
	// World is the devices; TP, CP, DP, PP and VPP the layout's sizes
	// (VPP 1 without interleaving); Microbatches the micro-batches each
	// data-parallel rank runs in an iteration.
	World        int `json:"world"`
	TP           int `json:"tp"`
	CP           int `json:"cp"`
	DP           int `json:"dp"`
	PP           int `json:"pp"`
	VPP          int `json:"vpp"`
	Microbatches int `json:"microbatches"`
	// Schedule names the pipeline schedule.
	Schedule string `json:"schedule"`
	// IterationSeconds is one iteration's time; Time its parts.
	IterationSeconds float64   `json:"iteration_seconds"`
	Time             TimeSplit `json:"time"`
	// TokensPerSecond is the global batch's tokens over the iteration.
	TokensPerSecond float64 `json:"tokens_per_second"`
	// ModelTFLOPSPerDevice is the model's FLOPs of an iteration
	// (gpt.TrainingFLOPs, recompute not counted) over its time and the
	// devices, in 10¹² FLOP/s; PeakFraction that over a device's peak
	// (the model FLOPs utilisation).
	ModelTFLOPSPerDevice float64 `json:"model_tflops_per_device"`
	PeakFraction         float64 `json:"peak_fraction"`
	// Ranks are the pipeline ranks, first to last.
	Ranks []RankPlan `json:"ranks"`
	// Timeline is the simulated pipeline, drawable as gotron train
	// --profile-schedule draws a measured one.
	Timeline *pp.Timeline `json:"-"`
}

// TimeSplit divides an iteration's time, in seconds, along the busiest
// pipeline rank: its kernels, the tensor-, expert- (a MoE layer's token
// dispatch) and context-parallel communication they leave exposed, its idle time in the pipeline, then
// what follows the pipeline: the data-parallel gradient reduction (and
// the distributed optimizer's parameter gather) left exposed, the tied
// embedding's all-reduce between the first and last stages, and the
// optimizer's step.
type TimeSplit struct {
	Compute       float64 `json:"compute"`
	TPComm        float64 `json:"tp_comm"`
	EPComm        float64 `json:"ep_comm"`
	CPComm        float64 `json:"cp_comm"`
	Bubble        float64 `json:"bubble"`
	DPComm        float64 `json:"dp_comm"`
	EmbeddingSync float64 `json:"embedding_sync"`
	Optimizer     float64 `json:"optimizer"`
}

// RankPlan is one pipeline rank's share.
type RankPlan struct {
	PipelineRank int `json:"pipeline_rank"`
	// Layers are the decoder layers the rank holds, over its chunks.
	Layers int `json:"layers"`
	// Memory is a device's memory, by part; MemoryBytes their sum, and
	// Fits whether it is within the device's memory.
	Memory      RankMemory `json:"memory"`
	MemoryBytes float64    `json:"memory_bytes"`
	Fits        bool       `json:"fits"`
	// InFlight is the most micro-batch-chunks whose activations the rank
	// holds at once (the schedule's, found by pp.Verify).
	InFlight int `json:"in_flight"`
	// BusySeconds is the rank's time in its kernels and exposed
	// communication, IdleFraction the rest of the pipeline's time.
	BusySeconds  float64 `json:"busy_seconds"`
	IdleFraction float64 `json:"idle_fraction"`
}

// RankMemory is a device's memory by part, in bytes.
type RankMemory struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients"`
	Optimizer   float64 `json:"optimizer"`
	Activations float64 `json:"activations"`
}

// Predict plays one iteration of run a on world devices of hardware hw:
// each model chunk's forward, backward and weight-gradient times from its
// FLOPs and bytes (costModel), every pipeline rank's real action list
// (pp.BuildAll, checked and its in-flight activations counted by
// pp.Verify) played with those times (pp.SimulateStages), then the
// data-parallel reduction, the embedding's all-reduce and the optimizer;
// and each rank's memory from the model the up-front check uses
// (parameterBytes, gpt.EstimateActivationsAt). docs/PLAN.md describes the
// model and its accuracy.
//
// It returns ctx's error once ctx is done.
func Predict(ctx context.Context, a Run, world int, hw Hardware) (*Prediction, error) {
	if err := plannable(a, world); err != nil {
		return nil, err
	}
	d, err := deviceOf(a, hw)
	if err != nil {
		return nil, err
	}
	mp := a.Model.ModelParallelConfig
	dp, _ := a.dataParallel(world)
	l := newExpertLayout(hw, max(mp.TensorModelParallelSize, 1), max(mp.ContextParallelSize, 1), dp, max(mp.PipelineModelParallelSize, 1),
		max(mp.ExpertModelParallelSize, 1), max(mp.EffectiveExpertTensorParallelSize(), 1))
	chunks, err := a.Model.PipelineChunks()
	if err != nil {
		return nil, err
	}
	m := a.microBatches(dp)
	if n := l.pp * len(chunks[0]) * m; n > maxChunkMicrobatches {
		return nil, fmt.Errorf("%d micro-batches × %d pipeline stages × %d model chunks: gotron plan plays at most %d micro-batch-chunks an iteration; plan a smaller --global-batch-size (the time per sample does not depend on it once the pipeline is full)",
			m, l.pp, len(chunks[0]), maxChunkMicrobatches)
	}
	ss, live, err := schedules(a, l.pp, m)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := costModel{d: d, l: l, cfg: a.Model, b: float64(a.MicroBatchSize), split: ss[0].SplitBackward, flash: !a.UnfusedAttention,
		fsdp: fsdpMode{grads: a.DDP.ShardsGradients(), params: a.DDP.ShardsParameters()}, run: a}
	c.dense, c.moeLayer = layerShares(a.Model)
	costs := make([][]phases, l.pp)
	for r := range costs {
		for _, ch := range chunks[r] {
			costs[r] = append(costs[r], c.chunk(ch))
		}
	}
	// The simulation's unit is a millisecond (the timeline's).
	// A message is a micro-batch's activations, sequence-sharded under
	// sequence parallelism (Megatron-Core's get_tensor_shapes).
	msg := d.message(c.tokens()*float64(a.Model.HiddenSize)*d.elem*c.replicated(), l.ppLink)
	sim, err := pp.SimulateStages(ss, 1e3*msg, func(r, v int) pp.StageTimes {
		p := costs[r][v]
		return pp.StageTimes{F: 1e3 * p.F.total(), B: 1e3 * p.B.total(), W: 1e3 * p.W.total()}
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pr := &Prediction{Hardware: hw.Name, World: world, TP: l.tp, CP: l.cp, DP: dp, PP: l.pp, VPP: len(chunks[0]),
		Microbatches: m, Schedule: scheduleName(a), Timeline: sim.Timeline}
	sim.Timeline.Title = "gotron plan, simulated on " + hw.Name
	pr.Time = split(costs, sim, m)
	post := newPostPipeline(a, c, chunks, world)
	pr.Time.DPComm += post.dataParallel(sim)
	pr.Time.EmbeddingSync = post.embeddingSync()
	pr.Time.Optimizer = post.optimizer()
	pr.IterationSeconds = sim.End/1e3 + pr.Time.DPComm + pr.Time.EmbeddingSync + pr.Time.Optimizer
	tokens := float64(a.GlobalBatchSize) * float64(a.Model.SeqLength)
	pr.TokensPerSecond = tokens / pr.IterationSeconds
	pr.ModelTFLOPSPerDevice = gpt.TrainingFLOPs(a.Model, int(tokens)) / pr.IterationSeconds / float64(world) / 1e12
	pr.PeakFraction = pr.ModelTFLOPSPerDevice * 1e12 / d.peak
	for r := range l.pp {
		pr.Ranks = append(pr.Ranks, post.rank(r, chunks[r], live[r], sim, hw))
	}
	if t := pr.IterationSeconds; !(t > 0) || math.IsInf(t, 0) || !(pr.TokensPerSecond > 0) || math.IsInf(pr.TokensPerSecond, 0) {
		return nil, fmt.Errorf("the run on %s gives an iteration of %g s, %g tokens/s: the sizes or the description's numbers are out of range", hw.Name, t, pr.TokensPerSecond)
	}
	return pr, nil
}

// maxChunkMicrobatches bounds the actions a plan plays: pipeline stages ×
// model chunks × micro-batches (a few seconds and a gigabyte at most).
const maxChunkMicrobatches = 1 << 21

// maxLayers bounds the layers a plan prices.
const maxLayers = 1 << 14

// plannable refuses what the planner does not model yet, naming it.
func plannable(a Run, world int) error {
	cfg := a.Model
	var errs []error
	if cfg.NumLayers > maxLayers {
		errs = append(errs, fmt.Errorf("--num-layers %d: gotron plan prices up to %d layers", cfg.NumLayers, maxLayers))
	}
	for _, t := range cfg.CPCommType {
		if t != "p2p" && cfg.ContextParallelSize > 1 {
			errs = append(errs, fmt.Errorf("--cp-comm-type %s: gotron plan prices the ring (p2p) only so far; plan with --cp-comm-type p2p", t))
			break
		}
	}
	if cfg.DeferEmbeddingWgradCompute {
		errs = append(errs, errors.New("--defer-embedding-wgrad-compute: gotron plan does not move the output layer's weight gradients into the flush yet; plan without it"))
	}
	mp := cfg.ModelParallelConfig
	if n := max(mp.TensorModelParallelSize, 1) * max(mp.ContextParallelSize, 1) * max(mp.PipelineModelParallelSize, 1); world < 1 || world%n != 0 {
		errs = append(errs, fmt.Errorf("--world-size %d is not a multiple of tensor × context × pipeline parallel size %d", world, n))
	}
	return errors.Join(errs...)
}

// deviceOf is hw as a's ranks see it.
func deviceOf(a Run, hw Hardware) (device, error) {
	dtype, elem := "fp32", 4.0
	switch {
	case a.Model.BF16:
		dtype, elem = "bf16", 2
	case a.Model.FP16:
		dtype, elem = "fp16", 2
	}
	if hw.ActivationBytes > 0 {
		elem = hw.ActivationBytes
	}
	peak, err := hw.peak(dtype)
	return device{hw: hw, peak: peak, elem: elem}, err
}

// scheduleName is the pipeline schedule a runs.
func scheduleName(a Run) string {
	switch {
	case a.Model.PipelineModelParallelSize < 2:
		return "no pipelining"
	case a.PipelineSchedule != "" && a.PipelineSchedule != pp.ScheduleOneFOneB:
		return a.PipelineSchedule
	case a.Model.VirtualPipelineModelParallelSize > 0:
		return "interleaved 1F1B"
	}
	return "1F1B"
}

// schedules builds and verifies every pipeline rank's action list for m
// micro-batches, as gotron train would run it, and returns each rank's
// peak of in-flight micro-batch-chunks.
func schedules(a Run, p, m int) ([]*pp.Schedule, []int, error) {
	mp := a.Model.ModelParallelConfig
	cfg := pp.Config{PP: p, VPP: mp.VirtualPipelineModelParallelSize, Microbatches: m, GroupSize: mp.MicrobatchGroupSizePerVPStage,
		OverlapP2PComm: mp.OverlapP2PComm, OverlapP2PCommWarmupFlush: mp.OverlapP2PCommWarmupFlush, BatchP2PComm: mp.BatchP2PComm,
		DeallocatePipelineOutputs: true, Schedule: a.PipelineSchedule} // (--defer-embedding-wgrad-compute is refused: plannable)
	if p < 2 {
		cfg.VPP = 0
	}
	ss, err := pp.BuildAll(cfg)
	if err != nil {
		return nil, nil, err
	}
	res, err := pp.VerifyWith(ss, pp.VerifyOptions{})
	if err != nil {
		return nil, nil, err
	}
	return ss, res.PeakLive, nil
}

// split is the busiest rank's pipeline time by what it waits on: its
// chunks' kernels and exposed communication over the m micro-batches,
// and its idle time until the last rank ends.
func split(costs [][]phases, sim *pp.Simulation, m int) TimeSplit {
	busiest := 0
	for r := range sim.Busy {
		if sim.Busy[r] > sim.Busy[busiest] {
			busiest = r
		}
	}
	var w work
	for _, p := range costs[busiest] {
		w = w.plus(p.F).plus(p.B).plus(p.W)
	}
	k := float64(m)
	bubble := sim.End/1e3 - k*w.total()
	if bubble < 1e-9*sim.End/1e3 {
		bubble = 0 // a rank that never waits, up to rounding
	}
	return TimeSplit{Compute: k * w.Compute, TPComm: k * w.TP, CPComm: k * w.CP, EPComm: k * w.EP, DPComm: k * w.DP, Bubble: bubble}
}

// Max is a plan's worst rank: the largest memory.
func (p *Prediction) Max() RankPlan {
	var out RankPlan
	for _, r := range p.Ranks {
		if r.MemoryBytes > out.MemoryBytes {
			out = r
		}
	}
	return out
}

// params are the parameters one rank holds: those the data-parallel
// ranks share (dense), and the routed experts', which the expert
// data-parallel ranks share.
type params struct{ dense, experts float64 }

func (p params) plus(o params) params { return params{p.dense + o.dense, p.experts + o.experts} }

// bytes is what the parameters take in weights, gradients and optimizer
// state under a (Run.parameterBytes, the optimizer's over its shards).
func (p params) bytes(a Run, st stateShare) (w, g, o float64) {
	pw, pg, po := a.parameterBytes()
	ds, es := st.optimizerShards(a)
	n := p.dense + p.experts
	return n * pw, n * pg, p.dense*po/ds + p.experts*po/es
}

// chunkParameters is the parameters a model chunk's rank holds: its
// decoder layers' over the tensor-parallel ranks (a MoE layer's routed
// experts over the ep·etp expert ranks), the word embedding (or its copy,
// and an untied output layer) split over the vocabulary, the learned
// positions whole.
func chunkParameters(cfg config.TransformerConfig, ch config.PipelineChunk) params {
	t := float64(max(cfg.TensorModelParallelSize, 1))
	h, v := float64(cfg.HiddenSize), float64(cfg.PaddedVocabSize())
	dense, moe := layerShares(cfg)
	var n params
	for i := range ch.NumLayers {
		if cfg.IsMoELayer(ch.LayerOffset + i) {
			n = n.plus(moe)
		} else {
			n = n.plus(dense)
		}
	}
	tied := cfg.ShareEmbeddingsAndOutputWeights
	if ch.HoldsWordEmbedding(tied) {
		n.dense += v * h / t
	}
	if ch.PostProcess && !tied {
		n.dense += v * h / t
	}
	if ch.PreProcess && cfg.LearnedPositions() {
		n.dense += float64(cfg.MaxPositions()) * h
	}
	// Each MTP depth: eh_proj (2h → h), its layer, its norms.
	last := cfg.NumLayers - 1
	for range ch.MTPLayers {
		n.dense += 2 * h * h / t
		if cfg.IsMoELayer(last) {
			n = n.plus(moe)
		} else {
			n = n.plus(dense)
		}
	}
	return n
}

// layerShares is what one rank holds of a dense and of a MoE decoder
// layer: its parameters over the tensor-parallel ranks, a MoE layer's
// routed experts over the ep·etp expert ranks.
func layerShares(cfg config.TransformerConfig) (dense, moe params) {
	t := float64(max(cfg.TensorModelParallelSize, 1))
	e := float64(max(cfg.ExpertModelParallelSize, 1) * max(cfg.EffectiveExpertTensorParallelSize(), 1))
	d, shared, experts := layerParameters(cfg)
	return params{dense: d / t}, params{dense: shared / t, experts: experts / e}
}
