package plan

import (
	"math"
	"runtime"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
)

// Run is what the memory model reads of a training run.
type Run struct {
	// Model is the model with its parallel sizes, precision and
	// recompute.
	Model config.TransformerConfig
	// DDP is the data-parallel wrapper's and the optimizer's settings
	// (use_distributed_optimizer, grad_reduce_in_fp32).
	DDP config.DDPConfig
	// GradReduceInBF16 keeps a bf16 model's gradients in bf16
	// (--grad-reduce-in-bf16).
	GradReduceInBF16 bool
	// MicroBatchSize and GlobalBatchSize give the micro-batches per
	// iteration (the pipeline's in flight).
	MicroBatchSize, GlobalBatchSize int
	// Threads is the cores the process uses (0: all): one attention
	// worker's scratch each.
	Threads int
	// Save says the run writes checkpoints (a copy of the state), in the
	// background with AsyncSave, with the optimizer's state with SaveOptim.
	Save, AsyncSave, SaveOptim bool
	// SGD says the optimizer is SGD (--optimizer sgd), which keeps one
	// float32 a parameter (its momentum buffer) with SGDMomentum, none
	// without; the zero value is Adam, which keeps two.
	SGD         bool
	SGDMomentum float64
	// UnfusedAttention says a plan's attention core keeps its scores in
	// memory, as Megatron's own (--attention-backend local) and TE's
	// unfused kernels do, and Megatron's 2022 kernels did: the scale, mask,
	// softmax and dropout go through memory, the whole s×s square is
	// computed, and a layer keeps Korthikanti et al.'s 5·a·s²·b bytes
	// unless selective recompute drops them. The zero value is flash
	// attention (--attention-backend flash, fused or auto): one fused
	// kernel that skips the causal mask's upper half and keeps only the
	// log-sum-exp rows. gotron's own CPU attention is of the second kind;
	// the field matters to Predict only.
	UnfusedAttention bool
	// PipelineSchedule is --pipeline-schedule ("" for the reference's):
	// a zero-bubble schedule holds more microbatches on a stage than 1F1B
	// (pp.HeldMicrobatches).
	PipelineSchedule string
}

// dataParallel is the data-parallel size on world ranks and the expert
// data-parallel size (config's rules), each at least 1 (an estimate of a
// world the sizes do not divide, which validation refuses, still gives
// numbers).
func (a Run) dataParallel(world int) (dp, edp int) {
	mp := a.Model.ModelParallelConfig
	dp, _ = mp.DataParallelSize(world)
	edp, _ = mp.ExpertDataParallelSize(world)
	return max(dp, 1), max(edp, 1)
}

// microBatches is the micro-batches per iteration of each data-parallel
// rank, at least 1.
func (a Run) microBatches(dp int) int {
	if d := a.MicroBatchSize * dp; d > 0 {
		return max(a.GlobalBatchSize/d, 1)
	}
	return 1
}

// Need is the memory a machine's ranks of a run need, in bytes, by
// component: what the checks before training compare with the machine's
// available memory. Values are float64 so that absurd sizes give +Inf, not
// a wrapped integer.
type Need struct {
	// Weights are the model parameters the process's ranks hold.
	Weights float64
	// Gradients are their gradient buffers.
	Gradients float64
	// Optimizer is the optimizer's state (Adam's two moments, SGD's
	// momentum buffer) and the float32 main parameters of a 16-bit model,
	// divided over the data-parallel ranks under the distributed
	// optimizer.
	Optimizer float64
	// Activations are what forward passes keep for backward: one
	// micro-batch per rank without pipelining, min(p−i, m) on pipeline
	// stage i under 1F1B (gpt.EstimateActivations per micro-batch).
	Activations float64
	// Attention is the attention kernels' per-worker score scratch: 8·s²
	// bytes per worker (13·s² with attention dropout), for the backward's
	// probabilities and their gradient.
	Attention float64
	// Checkpoint is a save's copy of the state the ranks write (float32
	// weights, and Adam's moments unless --no-save-optim): 0 without
	// --save. A synchronous save holds it while the activations are
	// free; with --async-save it lives while training goes on.
	Checkpoint float64
	// AsyncSave says the checkpoint copy coexists with the activations.
	AsyncSave bool
}

// Total is the peak: the components' sum, with the checkpoint copy in
// place of the activations when it is made between iterations.
func (m Need) Total() float64 {
	if m.AsyncSave {
		return m.Weights + m.Gradients + m.Optimizer + m.Attention + m.Activations + m.Checkpoint
	}
	return m.Weights + m.Gradients + m.Optimizer + m.Attention + max(m.Activations, m.Checkpoint)
}

// Memory returns the memory that localRanks of the run's world ranks
// need together (all of them for the in-process backend; under mpirun,
// the processes on one machine, which share its cores and memory).
//
// With P the model's parameters, t·p the ranks of one model replica and
// R = localRanks, the R ranks hold R/(t·p) copies of the weights:
//
//	weights   = P·R/(t·p)·w       w = 4 (float32) or 2 (bf16/fp16)
//	gradients = P·R/(t·p)·g       g = 4 unless gradients stay 16-bit
//	optimizer = P·R/(t·p)·(8 + 4·[16-bit])/(dp/instances if distributed optimizer)
//
// Megatron-FSDP's sharded strategies keep 1/dp of the weights and of
// float32 gradients, plus what stays whole or is in flight (fsdpState).
func Memory(a Run, world, localRanks int) Need {
	st := machineShare(a, world, localRanks)
	need := st.modelState(a)
	need.Activations = activationMemory(a, world, st.copies)
	need.Attention = attentionScratch(a, localRanks)
	if a.Save {
		need.Checkpoint = st.checkpointCopy(a, world, localRanks)
		need.AsyncSave = a.AsyncSave
	}
	return need
}

// stateShare is how much of the model's state the machine holds: its
// dense parameters in copies whole copies (tp·pp ranks hold one), a MoE
// model's experts in ecopies (etp·ep·pp ranks hold one), and the
// data-parallel sizes the distributed optimizer shards them over.
type stateShare struct {
	dense, experts  float64
	copies, ecopies float64
	dp, edp         float64
	dpcp            float64 // the data- and context-parallel ranks: the distributed optimizer's group
	shards          float64 // the ranks the dense state is sharded over: dp·cp, or dp·cp/instances
}

// machineShare returns the machine's share of the state of a's model on a
// world of world ranks, localRanks of them here.
func machineShare(a Run, world, localRanks int) stateShare {
	mp := a.Model.ModelParallelConfig
	tp, pp, cp := max(mp.TensorModelParallelSize, 1), max(mp.PipelineModelParallelSize, 1), max(mp.ContextParallelSize, 1)
	params := parameterCount(a.Model)
	experts := expertCount(a.Model)
	etp, ep := max(mp.EffectiveExpertTensorParallelSize(), 1), max(mp.ExpertModelParallelSize, 1)
	dp, edp := a.dataParallel(world)
	return stateShare{dense: params - experts, experts: experts,
		copies: float64(localRanks) / float64(tp*pp), ecopies: float64(localRanks) / float64(etp*ep*pp),
		dp: float64(dp), edp: float64(edp), dpcp: float64(dp * cp),
		shards: float64(max(dp*cp/max(a.DDP.NumDistributedOptimizerInstances, 1), 1))}
}

// moments is the float32 values of optimizer state a parameter has:
// Adam's two moments, SGD's momentum buffer, or none.
func (a Run) moments() float64 {
	switch {
	case !a.SGD:
		return 2
	case a.SGDMomentum != 0:
		return 1
	}
	return 0
}

// parameterBytes is the bytes a parameter takes in weights, gradients
// and optimizer state before any sharding: 4, 4 and 4·m in float32 (m = 2
// moments for Adam, SGD's 1 or 0); 2, 4 (2 when reduced in 16 bits) and
// 4·m + 4 (the main parameters) in bf16 or fp16.
func (a Run) parameterBytes() (w, g, o float64) {
	w, g, o = 4.0, 4.0, 4*a.moments()
	if a.Model.BF16 || a.Model.FP16 {
		w, o = 2, 4*a.moments()+4
		if a.GradReduceInBF16 || a.Model.FP16 && !a.DDP.GradReduceInFP32 {
			g = 2
		}
	}
	return w, g, o
}

// optimizerShards is how many ranks share each dense and each expert
// parameter's optimizer state: 1 without the distributed optimizer; the
// data- and context-parallel ranks dp·cp (edp for experts) over the
// instances with it (its group, gotron's and Megatron's, is dp·cp), the
// whole dp·cp with the hybrid strategies that split across the instances
// too.
func (st stateShare) optimizerShards(a Run) (dense, experts float64) {
	switch {
	case a.DDP.HybridShardsOptimizer():
		return st.dpcp, st.edp
	case a.DDP.UseDistributedOptimizer:
		return st.shards, st.edp
	}
	return 1, 1
}

// modelState is the weights, gradients and optimizer state the share
// takes (parameterBytes a parameter), the optimizer's over its shards
// (optimizerShards).
func (st stateShare) modelState(a Run) Need {
	w, g, o := a.parameterBytes()
	ds, es := st.optimizerShards(a)
	eo := o / es
	o /= ds
	need := Need{Weights: st.dense*st.copies*w + st.experts*st.ecopies*w, Gradients: st.dense*st.copies*g + st.experts*st.ecopies*g,
		Optimizer: st.dense*st.copies*o + st.experts*st.ecopies*eo}
	if a.DDP.ShardsGradients() {
		need.Weights, need.Gradients = st.fsdpState(a, w, g)
	}
	return need
}

// fsdpState is the weights and gradients of a dense model's share under
// Megatron-FSDP's sharded strategies (dp.FSDP), w and g bytes a parameter
// in the model's and the gradients' types: float32 gradient shards (4/dp
// a parameter) and the whole gradients of the parameters outside the
// decoder layers (the embeddings and the head, held through backward)
// and of the layers fsdpLayers says; the weights whole under
// optim_grads (the shards are slices of them), else the layers' shards
// (w/dp a parameter), the parameters outside the layers whole and the
// layers gathered.
func (st stateShare) fsdpState(a Run, w, g float64) (weights, grads float64) {
	dense := a.Model
	dense.NumMoEExperts = 0 // the parameters outside the layers do not depend on the experts
	dense.MTPNumLayers = 0  // the MTP depths are units too
	outside := float64(gpt.NumParameters(withLayers(dense, 1))) - layerCount(dense)
	n := float64(max(a.Model.NumLayers, 1) + max(a.Model.MTPNumLayers, 0))
	layer := (st.dense - outside) / n // a unit's dense parameters (router and shared experts included)
	// Every rank holds its units in flight whole, whatever the pipeline:
	// R/t copies of a unit's buffers where the sharded state has R/(t·p).
	unitCopies := st.copies * float64(max(a.Model.PipelineModelParallelSize, 1))
	tp := float64(max(a.Model.TensorModelParallelSize, 1))
	div := st.shards // the padding's: HFSDP pads for the pieces across instances too
	if a.DDP.HybridShardsOptimizer() {
		div = st.dpcp
	}
	gathered, whole := fsdpLayers(a, layer/tp, st.dense/tp/(n+1), n, div)
	grads = st.copies*(st.dense*4/st.shards+outside*g) + unitCopies*whole*layer*g
	if a.DDP.ShardsParameters() {
		weights = st.copies*w*((st.dense-outside)/st.shards+outside) + unitCopies*w*gathered*layer
	} else {
		weights = st.copies * st.dense * w
	}
	if st.experts == 0 {
		return weights, grads
	}
	// A MoE chunk's experts: their own FSDP over the expert data-parallel
	// ranks, a unit per MoE layer (the rank's experts of it).
	m := moeLayers(a.Model)
	if c := a.Model; c.NumLayers > 0 && c.IsMoELayer(c.NumLayers-1) {
		m += float64(c.MTPNumLayers) // the MTP depths' layers are MoE too
	}
	eLayer := st.experts / m
	eUnit := eLayer / float64(max(a.Model.EffectiveExpertTensorParallelSize(), 1)*max(a.Model.ExpertModelParallelSize, 1))
	gathered, whole = fsdpLayers(a, eUnit, eUnit, m, st.edp)
	eUnitCopies := st.ecopies * float64(max(a.Model.PipelineModelParallelSize, 1))
	grads += st.ecopies*st.experts*4/st.edp + eUnitCopies*whole*eLayer*g
	if a.DDP.ShardsParameters() {
		return weights + st.ecopies*w*st.experts/st.edp + eUnitCopies*w*gathered*eLayer, grads
	}
	return weights + st.ecopies*st.experts*w, grads
}

// withLayers is c with n decoder layers.
func withLayers(c config.TransformerConfig, n int) config.TransformerConfig {
	c.NumLayers = n
	return c
}

// moeLayers is the number of MoE layers of c, at least 1.
func moeLayers(c config.TransformerConfig) float64 {
	n := 0
	for i := range min(c.NumLayers, 1<<14) {
		if c.IsMoELayer(i) {
			n++
		}
	}
	return float64(max(n, 1))
}

// fsdpLayers is how many of n units of unit elements (a rank's layer),
// sharded over shards ranks, dp.FSDP holds whole at most: its
// communication unit u (dp.FSDPCommunicationUnit of the average unit avg,
// the group outside the layers included) gives the gathered units — the
// one in use and those prefetched until u/2 elements are ahead, at least
// one — and the units with whole gradients — the one accumulating and
// those whose reductions fill u, at least one.
func fsdpLayers(a Run, unit, avg, n, shards float64) (gathered, whole float64) {
	u := dp.FSDPCommunicationUnit(a.DDP, avg)
	pad := float64(dp.BucketEndDivisor(int(shards), a.DDP.PadBucketsForHighNCCLBusBW))
	unit = math.Ceil(unit/pad) * pad // as dp.FSDP pads it
	gathered = min(1+max(1, math.Ceil(u/2/unit)), n)
	whole = min(1+max(1, math.Floor(u/unit)), n)
	return gathered, whole
}

// layerParameters is a dense decoder layer's parameters, and a MoE
// layer's outside its routed experts (attention, norms, router, shared
// experts) and in them.
func layerParameters(c config.TransformerConfig) (dense, moeShared, experts float64) {
	plain := c
	plain.NumMoEExperts = 0
	dense = layerCount(plain)
	if c.NumMoEExperts <= 0 {
		return dense, 0, 0
	}
	all := c
	all.MoELayerFreq = nil // every layer MoE
	experts = expertLayerCount(c)
	return dense, layerCount(all) - experts, experts
}

// layerCount is one decoder layer's parameters.
func layerCount(c config.TransformerConfig) float64 {
	return float64(gpt.NumParameters(withLayers(c, 2))) - float64(gpt.NumParameters(withLayers(c, 1)))
}

// activationMemory is the activations the machine keeps: each rank of a
// pipeline of p stages keeps min(p−i, m) micro-batches of its L/p layers
// under 1F1B, min(p, m) under ZB-H1 and ZB-V, min(2p−1, m) under ZB-H2,
// min(p+1, m) under DualPipeV (pp.HeldMicrobatches).
func activationMemory(a Run, world int, copies float64) float64 {
	tp, stages := max(a.Model.TensorModelParallelSize, 1), max(a.Model.PipelineModelParallelSize, 1)
	s, b := float64(a.Model.SeqLength), float64(a.MicroBatchSize)
	h, f, v := float64(a.Model.HiddenSize), widest(a.Model), float64(a.Model.PaddedVocabSize())
	dp, _ := a.dataParallel(world)
	m := a.microBatches(dp)
	inFlight := 0.0
	for i := range stages {
		inFlight += float64(pp.HeldMicrobatches(a.PipelineSchedule, stages, i, m))
	}
	perMicroBatch, head := math.Inf(1), math.Inf(1)
	if s*b*max(h, f, v)*float64(max(a.Model.NumLayers, 1)) < 1<<55 {
		e := gpt.EstimateActivations(a.Model, a.MicroBatchSize)
		perMicroBatch, head = float64(e.Total), float64(e.Head)
	}
	// perMicroBatch covers every layer on one tensor-parallel rank; a
	// stage holds 1/p of them, and t ranks share each stage. The last
	// stage keeps, for each microbatch whose output-layer weight
	// gradients defer_embedding_wgrad_compute defers to the flush, that
	// layer's input and output gradient: about its head's activations.
	held := perMicroBatch / float64(stages) * inFlight
	if n := deferredEmbeddingWgrads(a.Model.ModelParallelConfig, m); n > 0 {
		held += float64(n) * head
	}
	return held * float64(tp) * copies
}

// deferredEmbeddingWgrads is how many of m microbatches have their
// output-layer weight gradients deferred (pp.DeferEmbeddingWgrad).
func deferredEmbeddingWgrads(mp config.ModelParallelConfig, m int) int {
	switch {
	case !mp.DeferEmbeddingWgradCompute || mp.PipelineModelParallelSize < 2:
		return 0
	case mp.WgradDeferralLimit > 0:
		return min(mp.WgradDeferralLimit, m)
	}
	return m
}

// attentionScratch is the attention core's per-worker buffers: 8·s² bytes
// per worker (13·s² with attention dropout), one worker per (batch row,
// head) pair at most.
func attentionScratch(a Run, localRanks int) float64 {
	s := float64(a.Model.SeqLength)
	threads := a.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	workers := max(1, threads/max(localRanks, 1))
	pairs := max(a.MicroBatchSize*a.Model.NumAttentionHeads/max(a.Model.TensorModelParallelSize, 1), 1)
	perWorker := 8 * s * s
	if a.Model.AttentionDropout > 0 {
		perWorker = 13 * s * s
	}
	return perWorker * float64(min(workers, pairs)) * float64(localRanks)
}

// checkpointCopy is the copy --save takes: every rank of the first
// replica writes its 1/(t·p) of the state, or 1/dp of it each under the
// distributed optimizer; the machine's share is bounded by the whole
// state per replica it holds, or 1/dp of it when it holds the whole world.
func (st stateShare) checkpointCopy(a Run, world, localRanks int) float64 {
	saved := 4.0
	if a.SaveOptim {
		saved += 4 * a.moments()
	}
	c := (st.dense*st.copies + st.experts*st.ecopies) * saved
	if a.DDP.UseDistributedOptimizer || localRanks >= world {
		c /= st.dp
	}
	return c
}

// ParameterCount is the model's parameters, as a float64 that absurd
// sizes cannot overflow (parameterCount).
func ParameterCount(c config.TransformerConfig) float64 { return parameterCount(c) }

// parameterCount returns the model's parameters as a float64: exactly
// (gpt.NumParameters) up to 16384 layers, beyond that the non-layer
// parameters plus num_layers times one layer's, or +Inf when a size is
// absurd.
func parameterCount(c config.TransformerConfig) float64 {
	h, f, v := float64(c.HiddenSize), widest(c), float64(max(c.VocabSize, c.MaxPositions()))
	if h*max(h, f, v) >= 1<<55 {
		return math.Inf(1)
	}
	if c.NumLayers <= 1<<14 {
		return float64(gpt.NumParameters(c))
	}
	layers := c.NumLayers
	c.NumLayers = 1
	one := float64(gpt.NumParameters(c))
	c.NumLayers = 2
	perLayer := float64(gpt.NumParameters(c)) - one
	return one - perLayer + float64(layers)*perLayer
}

// expertCount returns the parameters of the whole model's routed experts
// (E·(f₁·h + h·f) per MoE layer, E·(f₁ + h) more with add_bias_linear; the
// MTP depths' layers when the decoder's last is MoE), 0 for a dense
// model.
func expertCount(c config.TransformerConfig) float64 {
	if c.NumMoEExperts <= 0 {
		return 0
	}
	layers := 0.0
	if c.NumLayers <= 1<<14 {
		for i := range c.NumLayers {
			if c.IsMoELayer(i) {
				layers++
			}
		}
	} else {
		layers = float64(c.NumLayers)
	}
	if c.NumLayers > 0 && c.IsMoELayer(c.NumLayers-1) {
		layers += float64(c.MTPNumLayers) // the MTP depths' layers are MoE too
	}
	return layers * expertLayerCount(c)
}

// expertLayerCount is one MoE layer's routed experts' parameters,
// E·(f₁·h + h·f), E·(f₁ + h) more with add_bias_linear.
func expertLayerCount(c config.TransformerConfig) float64 {
	h, f := float64(c.HiddenSize), float64(c.MoEFFN())
	f1 := f
	if c.GatedLinearUnit {
		f1 = 2 * f
	}
	per := f1*h + h*f
	if c.AddBiasLinear {
		per += f1 + h
	}
	return float64(c.NumMoEExperts) * per
}

// widest is the widest activation of a layer, counted in float64 so that
// absurd sizes cannot overflow: linear_fc1's output (2·ffn gated) or
// linear_qkv's ((n + 2g)·d, with any --kv-channels).
func widest(c config.TransformerConfig) float64 {
	d := float64(c.HeadDim())
	qkv := (float64(c.NumAttentionHeads) + 2*float64(c.QueryGroups())) * d
	fc1 := float64(c.FFN())
	if c.GatedLinearUnit {
		fc1 *= 2
	}
	return max(qkv, fc1)
}
