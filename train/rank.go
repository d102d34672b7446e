package train

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// trainer is one rank's training state.
type trainer struct {
	a      Args
	groups *mesh.Groups
	dpg    comm.Group // the dp×cp group
	dpRank int
	dp     int
	micro  int // micro-batches per iteration on this rank

	tape  *autograd.Tape
	model *gpt.Model
	ddp   *dp.DDP
	opt   *optim.Adam
	sched optim.Schedule
	rand  *gpt.Randomness // dropout: the default stream and the tracker's
	data  *datasets
	tp    comm.Group // the tensor-parallel group
	mp    comm.Group // the model-parallel group (gradient norm)

	iteration int
}

// newTrainer builds the rank's model, optimizer and data, loading initial
// weights or a checkpoint as the arguments say.
func newTrainer(ctx context.Context, world comm.Group, a Args, ds *datasets, localRanks int) (*trainer, error) {
	mp := a.Model.ModelParallelConfig
	groups, err := mesh.Initialize(ctx, world, mesh.Sizes{
		TP: mp.TensorModelParallelSize, PP: mp.PipelineModelParallelSize, CP: mp.ContextParallelSize,
		EP: mp.ExpertModelParallelSize, ETP: mp.EffectiveExpertTensorParallelSize(),
		NumDistOptInstances: a.DDP.NumDistributedOptimizerInstances,
	})
	if err != nil {
		return nil, err
	}
	t := &trainer{a: a, groups: groups, dpg: groups.DPCP(), data: ds}
	t.dp, t.dpRank = t.dpg.Size(), t.dpg.Rank()
	t.micro = a.NumMicroBatches(t.dp)
	threads := a.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	perRank := max(1, threads/localRanks)
	t.tape = autograd.NewTape(ctx)
	t.tape.SetWorkers(perRank)
	// gotron splits GEMMs and kernels over the rank's cores itself, each
	// goroutine calling a single-threaded BLAS.
	blas.SetThreads(1)

	// Every rank draws the same initial master weights from the seed and
	// keeps its tensor-parallel partition.
	t.tp, t.mp = groups.TP(), groups.Get(mesh.GroupMP)
	t.model, err = gpt.NewParallel(a.Model, rng.New(a.Seed), t.tp)
	if err != nil {
		return nil, err
	}
	if a.LoadInit != "" {
		f, err := safetensors.ReadFile(a.LoadInit)
		if err != nil {
			return nil, fmt.Errorf("--load-init: %w", err)
		}
		if err := t.model.LoadTensors(f, "--load-init "+a.LoadInit); err != nil {
			return nil, err
		}
	}
	// Dropout streams: the default one is shared by the TP ranks of a
	// data-parallel replica and distinct per replica; the tracker's
	// model-parallel stream is distinct per TP rank (seed+2718+tp_rank).
	tracker, def, err := tp.ModelParallelManualSeed(rng.SplitMix64(a.Seed+1+uint64(t.dpRank)), t.tp.Rank(), 0, 0)
	if err != nil {
		return nil, err
	}
	t.rand = &gpt.Randomness{Default: def, Tracker: tracker}
	t.ddp, err = dp.New(t.model.Parameters(), t.dpg, a.DDP, a.Model.CalculatePerTokenLoss)
	if err != nil {
		return nil, err
	}
	t.opt = optim.NewAdam(t.model.Parameters(), optim.AdamConfig{
		Beta1: float32(a.AdamBeta1), Beta2: float32(a.AdamBeta2), Eps: float32(a.AdamEps),
		WeightDecay: float32(a.WeightDecay), Decoupled: true,
	})
	t.opt.Workers = perRank
	t.ddp.Workers = perRank
	t.sched = a.Schedule()
	if a.Load != "" {
		if err := t.resume(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// stepResult is what one iteration reports.
type stepResult struct {
	loss     float64
	gradNorm float64
	lr       float64
	elapsed  time.Duration
	// peakActivation is the rank's largest activation memory (bytes saved
	// for backward) during the iteration; peakActivations holds every
	// rank's, gathered when --log-json asks for them.
	peakActivation  int64
	peakActivations []int64
}

// gatherPeaks collects every rank's peak activation memory (a collective
// over the world, run when --log-json is set).
func (t *trainer) gatherPeaks(ctx context.Context, r *stepResult) error {
	w := t.groups.World
	r.peakActivations = make([]int64, w.Size())
	if err := w.AllGather(ctx, comm.I64(r.peakActivations), comm.I64([]int64{r.peakActivation})); err != nil {
		return fmt.Errorf("gathering peak activation memory: %w", err)
	}
	return nil
}

// step runs one iteration: micro-batches with gradient accumulation, the
// data-parallel gradient reduction, clipping and the optimizer update.
func (t *trainer) step(ctx context.Context) (stepResult, error) {
	start := time.Now()
	a := t.a
	mbs := a.MicroBatchSize
	t.ddp.ZeroGradBuffer()
	t.tape.ResetPeakActivationBytes()
	perToken := a.Model.CalculatePerTokenLoss
	var loss float64
	var tokens int64
	for k := 0; k < t.micro; k++ {
		row0 := t.dpRank*mbs*t.micro + k*mbs
		b := t.data.train.Batch(t.iteration, a.GlobalBatchSize, row0, mbs)
		losses, err := t.model.Forward(t.tape, b.InputIDs, b.Labels, b.Rows, b.Seq, t.rand)
		if err != nil {
			return stepResult{}, fmt.Errorf("iteration %d, micro-batch %d: %w", t.iteration+1, k, err)
		}
		var l *autograd.Var
		if perToken {
			// Σ loss·mask; normalised by the global token count in
			// finalize_model_grads.
			l = autograd.WeightedSum(t.tape, losses, tensor.FromSlice(gpt.SequenceFirst(b.LossMask, b.Rows, b.Seq), b.Rows*b.Seq))
			tokens += countTokens(b.LossMask)
		} else {
			l = gpt.MaskedMeanLoss(t.tape, losses, b, 1/float32(t.micro))
		}
		if err := autograd.Backward(t.tape, l, nil); err != nil {
			return stepResult{}, fmt.Errorf("iteration %d, micro-batch %d: backward: %w", t.iteration+1, k, err)
		}
		loss += float64(l.Value.Data()[0])
	}
	if err := t.ddp.StartGradSync(ctx); err != nil {
		return stepResult{}, err
	}
	var numTokens *int64
	if perToken {
		total, sum, err := t.sumTokensOverDP(ctx, tokens, loss)
		if err != nil {
			return stepResult{}, err
		}
		numTokens = &total
		loss = sum / float64(max(total, 1))
	}
	if err := dp.FinalizeModelGrads(ctx, []*dp.DDP{t.ddp}, dp.FinalizeOptions{
		NumTokens: numTokens, TP: t.tp, SequenceParallel: a.Model.SequenceParallel,
	}); err != nil {
		return stepResult{}, err
	}
	if !perToken {
		var err error
		if loss, err = t.averageOverDP(ctx, loss); err != nil {
			return stepResult{}, err
		}
	}
	if t.iteration == 0 && a.DumpGrads != "" {
		if err := t.dumpGrads(ctx); err != nil {
			return stepResult{}, err
		}
	}
	norm, err := optim.GradNorm(ctx, t.model.Parameters(), t.mp, t.tp.Rank())
	if err != nil {
		return stepResult{}, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return stepResult{}, fmt.Errorf("iteration %d: the loss is %g and the gradient norm %g: training diverged; lower --lr, raise --lr-warmup-iters, or set --clip-grad", t.iteration+1, loss, norm)
	}
	optim.ClipGradients(t.model.Parameters(), norm, a.ClipGrad)
	lr := t.sched.LR(t.opt.Steps)
	if err := t.opt.Step(float32(lr)); err != nil {
		return stepResult{}, err
	}
	t.iteration++
	return stepResult{loss: loss, gradNorm: norm, lr: lr, elapsed: time.Since(start), peakActivation: t.tape.PeakActivationBytes()}, nil
}

// dumpGrads writes the first step's gradients, gathered to whole tensors
// over the tensor-parallel group (every rank takes part; rank 0 writes).
func (t *trainer) dumpGrads(ctx context.Context) error {
	grads, err := t.model.GradTensors(ctx)
	if err != nil {
		return fmt.Errorf("--dump-grads: %w", err)
	}
	if t.groups.Rank != 0 {
		return nil
	}
	if err := safetensors.WriteFile(t.a.DumpGrads, grads, map[string]string{"iteration": "1"}); err != nil {
		return fmt.Errorf("--dump-grads: %w", err)
	}
	return nil
}

// sumTokensOverDP sums the token count and the loss sum over the
// data-parallel ranks.
func (t *trainer) sumTokensOverDP(ctx context.Context, tokens int64, loss float64) (int64, float64, error) {
	if t.dp == 1 {
		return tokens, loss, nil
	}
	n := []int64{tokens}
	if err := t.dpg.AllReduce(ctx, comm.I64(n), comm.Sum); err != nil {
		return 0, 0, fmt.Errorf("token count all-reduce over %s: %w", t.dpg.Name(), err)
	}
	l := []float32{float32(loss)}
	if err := t.dpg.AllReduce(ctx, comm.F32(l), comm.Sum); err != nil {
		return 0, 0, fmt.Errorf("loss all-reduce over %s: %w", t.dpg.Name(), err)
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

// averageOverDP returns the mean of x over the data-parallel ranks.
func (t *trainer) averageOverDP(ctx context.Context, x float64) (float64, error) {
	if t.dp == 1 {
		return x, nil
	}
	buf := []float32{float32(x)}
	if err := t.dpg.AllReduce(ctx, comm.F32(buf), comm.Avg); err != nil {
		return 0, fmt.Errorf("loss all-reduce over %s: %w", t.dpg.Name(), err)
	}
	return float64(buf[0]), nil
}

// evaluate returns the mean loss over EvalIters global batches of the
// validation data (the same batches at every evaluation, so values are
// comparable), or NaN when there is no validation data.
func (t *trainer) evaluate(ctx context.Context) (float64, error) {
	if t.data.valid == nil || t.a.EvalIters == 0 {
		return math.NaN(), nil
	}
	restore := t.tape.NoGrad()
	defer restore()
	mbs := t.a.MicroBatchSize
	var total float64
	for it := 0; it < t.a.EvalIters; it++ {
		for k := 0; k < t.micro; k++ {
			b := t.data.valid.Batch(it, t.a.GlobalBatchSize, t.dpRank*mbs*t.micro+k*mbs, mbs)
			losses, err := t.model.Forward(t.tape, b.InputIDs, b.Labels, b.Rows, b.Seq, nil)
			if err != nil {
				return 0, fmt.Errorf("evaluation: %w", err)
			}
			l := gpt.MaskedMeanLoss(t.tape, losses, b, 1/float32(t.micro))
			total += float64(l.Value.Data()[0])
		}
	}
	return t.averageOverDP(ctx, total/float64(t.a.EvalIters))
}
