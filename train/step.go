package train

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/pp"
	"github.com/gotron/gotron/tensor"
)

// microLoss is what the loss function reports for one microbatch: the sum
// of its per-token losses under the loss mask and the number of tokens
// counted.
type microLoss struct {
	sum    float64
	tokens int64
	// mtp are the multi-token-prediction depths' mean losses (over the CP
	// group's tokens), nil without.
	mtp []float64
}

// step runs one iteration: the microbatches' forward and backward passes
// through the pipeline schedule (which also finishes the gradients through
// finalize_model_grads), clipping and the optimizer update.
func (t *trainer) step(ctx context.Context) (stepResult, error) {
	start := time.Now()
	t.gc.atStep(t.iteration)
	a := t.a
	for _, d := range t.allDDPs() {
		d.ZeroGradBuffer()
	}
	tape := t.newTape(ctx)
	batch := a.stepAt(t.iteration, t.consumed)
	t.micro = batch.Rows / (a.MicroBatchSize * t.dp)
	var restoreBias func()
	if t.rerun != nil {
		t.rerun.start()
		defer t.rerun.finish()
		restoreBias = t.expertBiasState()
	}
	res, err := t.forwardBackward(ctx, tape, t.data.Train, batch, false)
	if err == nil && t.rerun != nil {
		tape, res, err = t.runAgain(ctx, tape, res, batch, restoreBias)
	}
	if err != nil {
		return stepResult{}, fmt.Errorf("iteration %d: %w", t.iteration+1, err)
	}
	loss, err := t.reduceLoss(ctx, res)
	if err != nil {
		return stepResult{}, err
	}
	mtp, err := t.mtpLosses(ctx, res)
	if err != nil {
		return stepResult{}, err
	}
	if t.iteration == 0 && a.DumpGrads != "" {
		if err := t.dumpGrads(ctx); err != nil {
			return stepResult{}, err
		}
	}
	scale := t.lossScale()
	pos := t.opt.Adam().Steps
	if t.sched.Samples {
		pos = int(t.lrSamples)
	}
	lr := t.sched.LR(pos)
	ok, norm, err := t.optimizerStep(ctx, loss, optim.Hyper{LR: float32(lr), WeightDecay: float32(t.sched.WD(pos))})
	switch {
	case err != nil:
		return stepResult{}, err
	case ok:
		t.lrSamples += int64(batch.Rows)
	default:
		t.skipped++
	}
	pnorm, zeros, err := t.paramStats(ctx, ok)
	if err != nil {
		return stepResult{}, err
	}
	skip := !ok
	t.iteration++
	t.consumed += int64(batch.Rows)
	return stepResult{loss: loss, mtpLosses: mtp, gradNorm: norm, paramsNorm: pnorm, numZeros: zeros, lr: lr, skipped: skip, lossScale: scale,
		globalBatch: batch.Rows, consumed: t.consumed, elapsed: time.Since(start), peakActivation: tape.PeakActivationBytes()}, nil
}

// expertBiasState snapshots the MoE layers' expert biases and token
// counts (which an iteration's finalize updates) and returns the function
// that puts them back: a rerun routes as the first run did.
func (t *trainer) expertBiasState() func() {
	var restore []func()
	for _, c := range t.chunks {
		for _, l := range c.MoELayers() {
			if l.Bias == nil {
				continue
			}
			bias, counts := slices.Clone(l.Bias), slices.Clone(l.Counts)
			restore = append(restore, func() { copy(l.Bias, bias); copy(l.Counts, counts) })
		}
	}
	return func() {
		for _, r := range restore {
			r()
		}
	}
}

// runAgain is --rerun-mode's rerun of the iteration in place: when
// needsRerun says so, the gradients are zeroed and the forward and
// backward run again on the same batch (the same masks: dropout is keyed
// by where it draws), and verdict compares the local losses; it returns
// the tape and result the iteration goes on with.
func (t *trainer) runAgain(ctx context.Context, tape *autograd.Tape, res *pp.Result, batch data.Step, restoreBias func()) (*autograd.Tape, *pp.Result, error) {
	again, err := t.needsRerun(ctx)
	if err != nil || !again {
		return tape, res, err
	}
	restoreBias() // the first run's finalize updated it
	t.resetMoEStats()
	for _, d := range t.allDDPs() {
		d.ZeroGradBuffer()
	}
	t.rerun.rerunning = true
	tape = t.newTape(ctx)
	res, err = t.forwardBackward(ctx, tape, t.data.Train, batch, false)
	t.rerun.rerunning = false
	if err != nil {
		return tape, res, fmt.Errorf("--rerun-mode's rerun: %w", err)
	}
	return tape, res, t.verdict(ctx)
}

// paramStats returns, when asked for, the updated parameters' global norm
// (--log-params-norm) and, after a step that ran (stepped), the main
// gradients' count of zeros (--log-num-zeros-in-grad); NaN otherwise.
// Both are collectives of every rank, after the step as in Megatron.
func (t *trainer) paramStats(ctx context.Context, stepped bool) (norm, zeros float64, err error) {
	norm, zeros = math.NaN(), math.NaN()
	if t.a.LogParamsNorm {
		if norm, err = t.opt.ParamsNorm(ctx); err != nil {
			return 0, 0, fmt.Errorf("--log-params-norm: %w", err)
		}
	}
	if t.a.LogNumZerosInGrad && stepped {
		if zeros, err = t.opt.ZerosInGrad(ctx); err != nil {
			return 0, 0, fmt.Errorf("--log-num-zeros-in-grad: %w", err)
		}
	}
	return norm, zeros, nil
}

// optimizerStep prepares the main gradients (the loss scaler may skip the
// update: ok false, the norm NaN) and takes the gradient norm, then clips
// and updates the parameters with the schedule's learning rate and weight
// decay h; it returns the norm. A non-finite loss or norm stops the run.
func (t *trainer) optimizerStep(ctx context.Context, loss float64, h optim.Hyper) (ok bool, norm float64, err error) {
	if f := t.timersFunc(); f != nil {
		timer := f("optimizer", 1)
		timer.Start(false)
		defer timer.Stop(false)
	}
	if ok, norm, err = t.opt.Prepare(ctx); err != nil || !ok {
		return ok, norm, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return false, 0, fmt.Errorf("iteration %d: the loss is %g and the gradient norm %g: training diverged; lower --lr, raise --lr-warmup-iters, or set --clip-grad", t.iteration+1, loss, norm)
	}
	return true, norm, t.opt.Update(ctx, h, norm)
}

// forwardBackward runs one pass over the rank's microbatches of global
// batch `batch` of ds (batch.Rows / (micro · dp) of them) through
// get_forward_backward_func, recorded on tape: training (forward and
// backward, then finalize_model_grads) or, with forwardOnly, evaluation.
func (t *trainer) forwardBackward(ctx context.Context, tape *autograd.Tape, ds data.Dataset, batch data.Step, forwardOnly bool) (*pp.Result, error) {
	a := t.a
	cfg := t.scheduleConfig()
	chunks := make([]pp.Chunk, len(t.chunks))
	for i, c := range t.chunks {
		chunks[i] = c
	}
	var rnd *gpt.Randomness
	if !forwardOnly {
		rnd = t.rand
	}
	if forwardOnly {
		restore := tape.NoGrad()
		defer restore()
	}
	mbs := a.MicroBatchSize
	micro := batch.Rows / (mbs * t.dp)
	fwd := func(ctx context.Context, s pp.ForwardStep) (*autograd.Var, pp.LossFunc, error) {
		// Micro-batch m of data-parallel rank r holds rows (m·dp + r)·mbs …
		// + mbs of the global batch, as the reference's
		// MegatronPretrainingSampler deals them out.
		row0 := (s.Microbatch*t.dp + t.dpRank) * mbs
		full := ds.Batch(batch, row0, mbs)
		b := t.cpSplit(full)
		c := t.chunks[s.Chunk]
		mtp := t.mtpBatches(c, full, forwardOnly)
		started := time.Now()
		defer t.slowDown(started)
		out, err := c.ForwardInputs(tape, gpt.Inputs{IDs: b.InputIDs, Labels: b.Labels, Rows: b.Rows, Seq: b.Seq,
			PositionIDs: b.PositionIDs, Segments: b.Segments, MoEAuxLossScale: t.moeAuxLossScale(micro),
			PreHook: t.paramPreHook(ctx, s.Chunk), PostHook: t.paramPostHook(ctx, tape, s.Chunk), CPWait: &t.cpWait,
			MTP: mtpInputs(mtp), Samples: sampleIndices(batch, row0, b.Rows)}, rnd, s.CheckpointActivations)
		if err != nil {
			return nil, nil, fmt.Errorf("micro-batch %d: %w", s.Microbatch, err)
		}
		switch {
		case !c.Spec.PostProcess:
			return out, nil, nil
		case mtp != nil:
			return out, t.mtpLossFunc(ctx, tape, b, mtp, s.Microbatch), nil
		}
		return out, t.lossFunc(ctx, tape, b, s.Microbatch), nil
	}
	var trace func(pp.Event)
	if t.rec != nil && !forwardOnly {
		trace = t.rec.Record
	}
	args := pp.Args{Trace: trace,
		Config: cfg, Rank: t.pp.Rank(), Tape: tape, Chunks: chunks, ForwardStep: fwd,
		P2P:             t.pipelineP2P(forwardOnly),
		NumMicrobatches: micro, ForwardOnly: forwardOnly, ContextParallelSize: cfg.ContextParallelSize,
		Schedule: a.PipelineSchedule,
	}
	if last := t.chunks[len(t.chunks)-1]; last.Spec.PostProcess {
		args.OutputWeight = last.OutputLayerWeight().Var
	}
	vpp := 0
	if cfg.VirtualPipelineModelParallelSize > 0 {
		vpp = len(t.chunks)
	}
	return pp.GetForwardBackwardFunc(t.pp.Size(), vpp)(ctx, args)
}

// sampleIndices returns the sample index of each of rows rows from row0 of
// global batch step: the samples consumed before it plus the row's place
// in it, whatever the layout (the counter-based dropout's key).
func sampleIndices(step data.Step, row0, rows int) []int64 {
	out := make([]int64, rows)
	for i := range out {
		out[i] = step.Consumed + int64(row0+i)
	}
	return out
}

// scheduleConfig is the model config with the callbacks the schedules
// call back into the trainer through: no_sync, finalize_model_grads, the
// loss scale, and under the overlaps each chunk's gradient reduction and
// parameter all-gather.
func (t *trainer) scheduleConfig() config.TransformerConfig {
	a := t.a
	cfg := a.Model
	cfg.NoSyncFunc = t.noSync
	cfg.FinalizeModelGradsFunc = t.finalize
	cfg.Timers = t.timersFunc()
	if s := t.opt.Scaler(); s != nil {
		cfg.GradScaleFunc = s.Scale
	}
	if a.DDP.OverlapGradReduce {
		cfg.GradSyncFunc = func(ctx context.Context, chunk int) error {
			for _, d := range t.chunkDDPs(chunk) {
				if err := d.StartGradSync(ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if a.DDP.OverlapParamGather && a.DDP.AlignParamGather {
		cfg.ParamSyncFunc = func(ctx context.Context, chunk int) error {
			for _, d := range t.chunkDDPs(chunk) {
				if err := d.StartParamSync(ctx, false); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return cfg
}

// moeAuxLossScale is the backward scale of the MoE auxiliary losses for
// a pass of micro microbatches: the loss scale (MoEGradScaleFunc, else
// GradScaleFunc, else 1) × cp / micro, as the reference's forward step
// sets MoEAuxLossAutoScaler's.
func (t *trainer) moeAuxLossScale(micro int) float32 {
	s := float32(1)
	if sc := t.opt.Scaler(); sc != nil {
		s = sc.Scale()
	}
	return s * float32(t.cp.Size()) / float32(max(micro, 1))
}

// cpSplit returns the rank's part of a micro-batch under context
// parallelism.
func (t *trainer) cpSplit(b data.Batch) data.Batch { return gpt.SplitBatch(b, t.cp) }

// activationShape is the shape of the tensors between pipeline stages:
// [s/cp (/tp under sequence parallelism), b, h].
func (t *trainer) activationShape() []int {
	m := t.a.Model
	s := m.SeqLength / t.cp.Size()
	if m.SequenceParallel && t.tp.Size() > 1 {
		s /= t.tp.Size()
	}
	return []int{s, t.a.MicroBatchSize, m.HiddenSize}
}

// pipelineP2P is the schedule's pipeline communicators and the shapes it
// receives: activationShape, and in training, past a standalone MTP stage,
// the main hidden states followed by each depth's along the sequence
// (gpt.Model.Forward), (1 + mtp_num_layers) times as long. gotron knows
// these shapes from the layout and sends no shape messages for them (the
// reference's mtp_standalone exchanges them before every message), so
// every schedule runs with the MTP stage anywhere the layout rules allow.
// In evaluation the depths are dropped and every boundary is
// activationShape.
func (t *trainer) pipelineP2P(forwardOnly bool) pp.P2P {
	p := pp.P2P{Comm: t.p2p, GradComm: t.p2pGrad, Shape: t.activationShape()}
	if forwardOnly || !t.a.Model.MTPStandalone() {
		return p
	}
	long := slices.Clone(p.Shape)
	long[0] *= 1 + t.a.Model.MTPNumLayers
	p.InputShapes, p.OutputShapes = make([][]int, len(t.chunks)), make([][]int, len(t.chunks))
	for v, c := range t.chunks {
		if c.Spec.AfterMTP {
			p.InputShapes[v] = long
		}
		if c.Spec.MTP || c.Spec.AfterMTP {
			p.OutputShapes[v] = long
		}
	}
	return p
}

// lossFunc is the GPT's loss_func for micro-batch b: the sum of the
// per-token losses under the loss mask and the number of tokens counted
// (the reference's 3-tuple); the schedule divides by the count and the
// number of microbatches, or, with calculate_per_token_loss,
// finalize_model_grads divides by the global count.
//
// Under context parallelism b is the rank's part of the micro-batch: the
// sum and the count are also summed over the CP group, for the report
// and for the schedule, which divides by the group's count (and
// multiplies by cp, undoing the gradients' average over the CP ranks), so
// that every token weighs what it weighs on one rank.
func (t *trainer) lossFunc(ctx context.Context, tape *autograd.Tape, b data.Batch, micro int) pp.LossFunc {
	return func(losses *autograd.Var) (pp.Loss, error) {
		t.injectIntoLoss(losses, micro)
		mask := gpt.SequenceFirst(b.LossMask, b.Rows, b.Seq)
		sum := autograd.WeightedSum(tape, losses, tensor.FromSlice(mask, len(mask)))
		v := sum.Value.Data()[0]
		if corruptLoss != nil {
			v = corruptLoss(t.groups.World.Rank(), t.iteration+1, micro, v)
		}
		if err := t.checkLoss(micro, 0, v); err != nil {
			return pp.Loss{}, err
		}
		n := countTokens(mask)
		l := pp.Loss{Value: sum, NumTokens: n, Reported: microLoss{sum: float64(sum.Value.Data()[0]), tokens: n}}
		if t.cp.Size() == 1 {
			return l, nil
		}
		group, err := t.overCP(ctx, sum.Value.Data()[0], n)
		if err != nil {
			return pp.Loss{}, err
		}
		l.GroupTokens, l.Reported = group.tokens, group
		return l, nil
	}
}

// slowDown is --inject-fault slow=F: the rank's forward computation that
// began at started takes F times as long (a slow core, not a wait).
func (t *trainer) slowDown(started time.Time) {
	if f, ok := faultAt(t.faults, FaultSlow, t.groups.World.Rank(), t.iteration+1); ok {
		time.Sleep(time.Duration((f.Factor - 1) * float64(time.Since(started))))
	}
}

// injectIntoLoss is --inject-fault nan and bitflip: the first per-token
// loss of micro-batch 0 (an activation) becomes NaN, or has a bit flipped
// in the iteration's first run only (a transient fault).
func (t *trainer) injectIntoLoss(losses *autograd.Var, micro int) {
	rank, it := t.groups.World.Rank(), t.iteration+1
	if micro != 0 || len(t.faults) == 0 {
		return
	}
	v := losses.Value.Data()
	if _, ok := faultAt(t.faults, FaultNaN, rank, it); ok {
		v[0] = float32(math.NaN())
	}
	if _, ok := faultAt(t.faults, FaultBitflip, rank, it); ok && (t.rerun == nil || !t.rerun.rerunning) {
		v[0] = flipBit(v[0])
	}
}

// corruptLoss, when set (by a test), replaces the local loss sum the
// checks see of a micro-batch (world rank, iteration, micro-batch): a
// fault injected into the result.
var corruptLoss func(rank, iteration, micro int, sum float32) float32

// checkLoss is --check-for-nan-in-loss-and-grad's loss half (the
// reference's validate_result on the loss in pretrain_gpt.py's loss_func):
// micro-batch micro's local loss sum, before any reduction, must be finite
// (the main loss's, depth 0, or MTP depth depth's). (The error reaches the
// user behind the rank, the iteration and the schedule step.)
func (t *trainer) checkLoss(micro, depth int, sum float32) error {
	if t.rerun != nil && t.rerun.record(lossKey{micro, depth}, sum, t.a.RerunMode, t.a.CheckForNaNInLossAndGrad, t.a.CheckForSpikyLoss && depth == 0) {
		return nil // the rerun decides
	}
	v := float64(sum)
	if !t.a.CheckForNaNInLossAndGrad || !math.IsNaN(v) && !math.IsInf(v, 0) {
		return nil
	}
	what := "NaN"
	if math.IsInf(v, 0) {
		what = "Inf"
	}
	where := fmt.Sprintf("tensor-parallel rank %d, data-parallel rank %d", t.tp.Rank(), t.dpRank)
	if t.cp.Size() > 1 {
		where += fmt.Sprintf(", context-parallel rank %d", t.cp.Rank())
	}
	loss := "the local loss"
	if depth > 0 {
		loss = fmt.Sprintf("MTP depth %d's local loss", depth)
	}
	return fmt.Errorf("found %s in %s of micro-batch %d (%s) before any reduction (--check-for-nan-in-loss-and-grad): training diverged, or its input is bad: lower --lr, raise --lr-warmup-iters or set --clip-grad, and check the data",
		what, loss, micro, where)
}

// overCP sums a micro-batch's loss sum and token count over the
// context-parallel group.
func (t *trainer) overCP(ctx context.Context, sum float32, tokens int64) (microLoss, error) {
	s, n := []float32{sum}, []int64{tokens}
	if err := t.sumOverCP(ctx, s, n); err != nil {
		return microLoss{}, err
	}
	return microLoss{sum: float64(s[0]), tokens: n[0]}, nil
}

// noSync is the config's no_sync_func: every chunk's gradient reduction is
// suspended until the returned function runs.
func (t *trainer) noSync() func() {
	ddps := t.allDDPs()
	resume := make([]func(), len(ddps))
	for i, d := range ddps {
		resume[i] = d.NoSync()
	}
	return func() {
		for _, r := range resume {
			r()
		}
	}
}

// finalize is the config's finalize_model_grads_func.
func (t *trainer) finalize(ctx context.Context, numTokens *int64, forceAllReduce bool) error {
	if numTokens != nil {
		// The last stage counted the tokens: broadcast over the pipeline,
		// sum over the data-parallel ranks.
		n := []int64{*numTokens}
		if err := t.pp.Broadcast(ctx, comm.I64(n), t.lossRank()); err != nil {
			return fmt.Errorf("token count broadcast over %s: %w", t.pp.Name(), err)
		}
		if t.dpg.Size() > 1 {
			if err := t.dpg.AllReduce(ctx, comm.I64(n), comm.Sum); err != nil {
				return fmt.Errorf("token count all-reduce over %s: %w", t.dpg.Name(), err)
			}
		}
		numTokens = &n[0]
	}
	return dp.FinalizeModelGrads(ctx, t.allDDPs(), dp.FinalizeOptions{
		NumTokens: numTokens, TP: t.tp, SequenceParallel: t.a.Model.SequenceParallel,
		Embedding: t.groups.Get(mesh.GroupEmbd), EmbeddingParams: t.sharedEmbeddings(),
		PosEmbedding: t.groups.Get(mesh.GroupPosEmbd), PosEmbeddingParams: t.positionEmbeddings(),
		ForceAllReduce: forceAllReduce, Experts: t.updateExpertBias,
	})
}

// updateExpertBias is finalize_model_grads' expert-bias step: each MoE
// layer's routed-token counts of the iteration, summed over the
// tensor-, data- and context-parallel ranks, move its bias toward balance
// (moe.Layer.UpdateBias).
func (t *trainer) updateExpertBias(ctx context.Context) error {
	for _, c := range t.chunks {
		for _, l := range c.MoELayers() {
			if l.Bias == nil {
				continue
			}
			tokens := append([]float32(nil), l.Counts...)
			for _, g := range []comm.Group{t.tp, t.dpg} {
				if g != nil && g.Size() > 1 {
					if err := g.AllReduce(ctx, comm.F32(tokens), comm.Sum); err != nil {
						return fmt.Errorf("expert token counts all-reduce over %s: %w", g.Name(), err)
					}
				}
			}
			l.UpdateBias(tokens)
		}
	}
	return nil
}

// normOwned reports whether the gradient norm counts a parameter's
// squares on this rank (optim.NormOwners of normParams).
func (t *trainer) normOwned() func(*nn.Parameter) bool {
	return optim.NormOwners(t.normParams(), t.tp.Rank(), moe.GroupRank(t.groups.Get(mesh.GroupExptTP)))
}

// finishParamSync finishes every parameter all-gather of the distributed
// optimizer (those overlap_param_gather leaves to the next forward pass),
// so that every rank holds the whole updated parameters: before they are
// read other than by a forward pass (a checkpoint).
func (t *trainer) finishParamSync(ctx context.Context) error {
	for _, d := range t.allDDPs() {
		if err := d.StartParamSync(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

// reduceLoss turns the last stage's microbatch losses into the
// iteration's loss on every rank: the mean of the microbatches' mean
// losses (or, with calculate_per_token_loss, the global sum over the
// global token count), broadcast from the last pipeline stage and averaged
// (summed) over the data-parallel ranks.
func (t *trainer) reduceLoss(ctx context.Context, res *pp.Result) (float64, error) {
	perToken := t.a.Model.CalculatePerTokenLoss
	sum, tokens, err := t.storedLoss(res, perToken)
	if err != nil {
		return 0, err
	}
	if sum, tokens, err = t.fromLastStage(ctx, sum, tokens); err != nil {
		return 0, fmt.Errorf("loss broadcast over %s: %w", t.pp.Name(), err)
	}
	if !perToken {
		return t.averageOverDP(ctx, sum)
	}
	total, s, err := t.sumTokensOverDP(ctx, tokens, sum)
	if err != nil {
		return 0, err
	}
	return s / float64(max(total, 1)), nil
}

// storedLoss reduces the micro-batch losses the last stage's schedule
// stored (nothing on other stages): the mean of their mean losses, or, per
// token, the sum of their loss sums and of their token counts.
func (t *trainer) storedLoss(res *pp.Result, perToken bool) (float64, int64, error) {
	var sum float64
	var tokens int64
	for _, r := range res.Store {
		l, ok := r.(microLoss)
		if !ok {
			return 0, 0, fmt.Errorf("train: the schedule stored %T, not a micro-batch loss", r)
		}
		if perToken {
			sum += l.sum
			tokens += l.tokens
		} else {
			sum += l.sum / float64(max(l.tokens, 1)) / float64(len(res.Store))
		}
	}
	return sum, tokens, nil
}

// fromLastStage broadcasts a loss and a token count from the last
// pipeline stage, which computed them, to every stage (the float64 exactly,
// as its bits).
func (t *trainer) fromLastStage(ctx context.Context, loss float64, tokens int64) (float64, int64, error) {
	if t.pp.Size() == 1 {
		return loss, tokens, nil
	}
	buf := []int64{int64(math.Float64bits(loss)), tokens}
	if err := t.pp.Broadcast(ctx, comm.I64(buf), t.lossRank()); err != nil {
		return 0, 0, err
	}
	return math.Float64frombits(uint64(buf[0])), buf[1], nil
}

// floatsFromLastStage broadcasts xs from the last pipeline stage, which
// computed them, to every stage, each float64 exactly (as its bits).
func (t *trainer) floatsFromLastStage(ctx context.Context, xs []float64) error {
	if t.pp.Size() == 1 {
		return nil
	}
	bits := make([]int64, len(xs))
	for k, v := range xs {
		bits[k] = int64(math.Float64bits(v))
	}
	if err := t.pp.Broadcast(ctx, comm.I64(bits), t.lossRank()); err != nil {
		return fmt.Errorf("broadcast over %s: %w", t.pp.Name(), err)
	}
	for k, b := range bits {
		xs[k] = math.Float64frombits(uint64(b))
	}
	return nil
}

// sumTokensOverDP sums the token count and the loss sum over the
// data-parallel replicas (the micro-batch losses are already summed over
// the context-parallel group).
func (t *trainer) sumTokensOverDP(ctx context.Context, tokens int64, loss float64) (int64, float64, error) {
	if t.dp == 1 {
		return tokens, loss, nil
	}
	g := t.replicas
	n := []int64{tokens}
	if err := g.AllReduce(ctx, comm.I64(n), comm.Sum); err != nil {
		return 0, 0, fmt.Errorf("token count all-reduce over %s: %w", g.Name(), err)
	}
	l := []float32{float32(loss)}
	if err := g.AllReduce(ctx, comm.F32(l), comm.Sum); err != nil {
		return 0, 0, fmt.Errorf("loss all-reduce over %s: %w", g.Name(), err)
	}
	return n[0], float64(l[0]), nil
}

func countTokens(mask []float32) int64 {
	var n int64
	for _, m := range mask {
		if m != 0 {
			n++
		}
	}
	return n
}

// averageOverDP returns the mean of x over the data-parallel replicas.
func (t *trainer) averageOverDP(ctx context.Context, x float64) (float64, error) {
	if t.dp == 1 {
		return x, nil
	}
	buf := []float32{float32(x)}
	if err := t.replicas.AllReduce(ctx, comm.F32(buf), comm.Avg); err != nil {
		return 0, fmt.Errorf("loss all-reduce over %s: %w", t.replicas.Name(), err)
	}
	return float64(buf[0]), nil
}

// profiledStep runs one iteration recording every rank's schedule (after a
// barrier, so that the ranks' clocks start together) and returns the
// timeline on world rank 0.
func (t *trainer) profiledStep(ctx context.Context) (stepResult, *pp.Timeline, error) {
	if err := t.groups.World.Barrier(ctx); err != nil {
		return stepResult{}, nil, fmt.Errorf("--profile-schedule: %w", err)
	}
	t.rec = pp.NewRecorder()
	r, err := t.step(ctx)
	rec := t.rec
	t.rec = nil
	if err != nil {
		return r, nil, err
	}
	tl, err := pp.GatherTimeline(ctx, t.groups.World, t.pp.Rank(), rec,
		pp.Timeline{PP: t.pp.Size(), VPP: len(t.chunks), Microbatches: t.micro})
	if err != nil {
		return r, nil, fmt.Errorf("--profile-schedule: %w", err)
	}
	return r, tl, nil
}

// evaluate returns the mean loss over EvalIters global batches of the
// validation data (the same batches at every evaluation, so values are
// comparable), or NaN when there is no validation data. Each batch runs
// through the pipeline schedule forward-only.
func (t *trainer) evaluate(ctx context.Context) (float64, error) {
	if t.data.Valid == nil || t.a.EvalIters == 0 {
		return math.NaN(), nil
	}
	var total float64
	for it := 0; it < t.a.EvalIters; it++ {
		res, err := t.forwardBackward(ctx, t.newTape(ctx), t.data.Valid, data.ConstantStep(it, t.a.GlobalBatchSize), true)
		if err != nil {
			return 0, fmt.Errorf("evaluation: %w", err)
		}
		l, _, err := t.storedLoss(res, false)
		if err != nil {
			return 0, fmt.Errorf("evaluation: %w", err)
		}
		total += l
	}
	total /= float64(t.a.EvalIters)
	total, _, err := t.fromLastStage(ctx, total, 0)
	if err != nil {
		return 0, fmt.Errorf("evaluation: loss broadcast over %s: %w", t.pp.Name(), err)
	}
	return t.averageOverDP(ctx, total)
}
