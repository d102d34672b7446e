package train

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/data/source"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/pp"
	"github.com/gotron/gotron/pp/p2p"
	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// trainer is one rank's training state.
type trainer struct {
	a      Args
	groups *mesh.Groups
	dpg    comm.Group // the dp×cp group: gradients, optimizer shards
	// dpRank and dp are the rank's place among the data-parallel replicas
	// (the pure dp group, replicas), which read different samples; the cp
	// ranks of a replica read the same samples and split each sequence.
	dpRank   int
	dp       int
	replicas comm.Group
	cp       *cp.Groups // the context-parallel groups
	micro    int        // micro-batches of the current iteration on this rank

	// workers is the goroutines the rank's kernels may use (its share of
	// the cores): every pass's tape gets them (newTape).
	workers int
	// chunks are this rank's model chunks (one per virtual pipeline stage),
	// ddps their data-parallel wrappers and expertDDPs those of their
	// expert parameters (nil for a chunk without experts).
	chunks     []*gpt.Model
	ddps       []dp.Wrapper
	expertDDPs []dp.Wrapper
	params     []*nn.Parameter // every chunk's parameters, in chunk order
	// opt is the optimizer, plain or distributed (use_distributed_optimizer),
	// with the loss scaler of a 16-bit model (nil: no loss scaling).
	opt optim.Optimizer
	// skipped counts the iterations whose step a non-finite gradient
	// skipped (fp16's dynamic loss scaling).
	skipped int
	sched   optim.Schedule
	rand    *gpt.Randomness // dropout: the default stream and the tracker's
	rerun   *rerunState     // --rerun-mode's record (nil: disabled)
	faults  []Fault         // --inject-fault's
	data    *source.Sets
	tp      comm.Group // the tensor-parallel group
	mp      comm.Group // the model-parallel group (gradient norm)
	pp      comm.Group // the pipeline-parallel group
	p2p     *p2p.Communicator
	p2pGrad *p2p.Communicator // the gradients' own, under the V placement
	rec     *pp.Recorder      // the schedule's events, while an iteration is profiled
	timers  *timers           // --timing-log-level's (nil at level 0)
	// cpWait is the nanoseconds ring attention has spent blocked on
	// receives (context parallelism), over the run.
	cpWait atomic.Int64

	iteration int
	// consumed is the samples the iterations so far consumed (Megatron's
	// consumed_train_samples): the data position.
	consumed int64
	// lrSamples is the samples of the optimizer steps taken (skipped
	// steps do not count), the learning-rate schedule's position in
	// --train-samples mode.
	lrSamples int64
	// freshStart says that --load named the --save directory and it held
	// no checkpoint yet: the run started from scratch.
	freshStart bool
	// saver writes the checkpoints into --save, every rank at once.
	saver *ckpt.Saver
	// npSaver writes the non-persistent checkpoints (NonPersistentDir);
	// nil until the first.
	npSaver *ckpt.Saver
	// loadedFrom is the directory the run resumed from: --load, or its
	// non-persistent checkpoints' when they were the newer.
	loadedFrom string
	// onSaved, if set, is called with the iteration of each checkpoint
	// installed.
	onSaved func(iteration int)
	gc      *collector // the run's (newTrainer)
}

// newTrainer builds the rank's model chunks, optimizer and data, loading
// initial weights or a checkpoint as the arguments say; gc (nil: none) is
// the run's collector, which each step calls first.
func newTrainer(ctx context.Context, world comm.Group, a Args, ds *source.Sets, localRanks int, gc *collector) (*trainer, error) {
	mp := a.Model.ModelParallelConfig
	groups, err := mesh.Initialize(ctx, world, mesh.Sizes{
		TP: mp.TensorModelParallelSize, PP: mp.PipelineModelParallelSize, CP: mp.ContextParallelSize,
		EP: mp.ExpertModelParallelSize, ETP: mp.EffectiveExpertTensorParallelSize(),
		NumDistOptInstances: a.DDP.NumDistributedOptimizerInstances, Placement: a.Model.PipelinePlacement,
		EmbeddingStages: a.Model.WordEmbeddingStages(),
	})
	if err != nil {
		return nil, err
	}
	t := &trainer{a: a, groups: groups, dpg: groups.DPCP(), replicas: groups.DP(), data: ds,
		saver: &ckpt.Saver{World: world, Dir: a.Save, WriteShard: writeShard, Commit: commitCheckpoint}, gc: gc}
	t.dp, t.dpRank = t.replicas.Size(), t.replicas.Rank()
	if mp.ContextParallelSize > 1 {
		if t.cp, err = cp.NewGroups(ctx, groups.CP(), mp.HierarchicalContextParallelSizes); err != nil {
			return nil, err
		}
	}
	t.micro = a.GlobalBatchAt(0) / (a.MicroBatchSize * t.dp)
	threads := a.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	perRank := max(1, threads/localRanks)
	t.workers = perRank
	// gotron splits GEMMs and kernels over the rank's cores itself, each
	// goroutine calling a single-threaded BLAS.
	blas.SetThreads(1)

	t.tp, t.mp, t.pp = groups.TP(), groups.Get(mesh.GroupMP), groups.PP()
	if !a.restarted {
		t.faults, _ = ParseFaults(a.InjectFault) // (Validate reports a malformed one)
	}
	if a.RerunMode != RerunDisabled && a.RerunMode != "" {
		t.rerun = &rerunState{}
	}
	if a.TimingLogLevel > 0 || a.LogStraggler {
		level := a.TimingLogLevel
		if a.LogStraggler {
			level = 2 // the computations' timers
		}
		t.timers = newTimers(level)
	}
	if err := t.buildModel(ctx, perRank); err != nil {
		return nil, err
	}
	t.sched = a.Schedule()
	if err := t.newP2P(ctx); err != nil {
		return nil, err
	}
	if a.Load != "" {
		if err := t.resume(); err != nil {
			return nil, err
		}
		// Every rank has loaded before any says so: a rank that cannot
		// (a damaged shard it alone reads) fails the others here, and
		// rank 0 never prints "resumed" for a run that ends at load.
		if err := world.Barrier(ctx); err != nil {
			return nil, fmt.Errorf("--load %s: waiting for every rank to load: %w", a.Load, err)
		}
	}
	return t, nil
}

// buildModel builds the rank's model chunks (with --load-init's weights),
// its dropout streams, and their data-parallel wrappers and optimizer.
func (t *trainer) buildModel(ctx context.Context, perRank int) error {
	if err := t.buildChunks(); err != nil {
		return err
	}
	if p := t.a.LoadInit; p != "" {
		f, err := safetensors.ReadFile(p)
		if err != nil {
			return fmt.Errorf("--load-init: %w", err)
		}
		for _, c := range t.chunks {
			if err := c.LoadTensors(f, "--load-init "+p); err != nil {
				return err
			}
		}
	}
	// Dropout streams: the default one is shared by the TP ranks of a
	// data-parallel replica and distinct per replica and pipeline stage
	// (Megatron offsets the seed by 100·pp_rank); the tracker's
	// model-parallel stream is distinct per TP rank (seed+2718+tp_rank).
	tracker, def, err := tp.ModelParallelManualSeed(t.dropoutSeed(), t.tp.Rank(), 0, 0)
	if err != nil {
		return err
	}
	// The hidden dropout is counter-based, keyed by the seed alone (the
	// same on every rank): its masks are one rank's under any layout.
	t.rand = &gpt.Randomness{Default: def, Tracker: tracker, Counter: true, Key: rng.Derive(t.a.Seed, dropoutKeyStream)}
	return t.wrapChunks(ctx, perRank)
}

// dropoutKeyStream derives the counter-based dropout's key from --seed.
const dropoutKeyStream = 0x64726f706f7574 // "dropout"

// newTape returns the tape of one pass (an iteration's forward and
// backward, an evaluation batch, a sample), under the pass's context, with
// the rank's workers.
func (t *trainer) newTape(ctx context.Context) *autograd.Tape {
	tape := autograd.NewTape(ctx)
	tape.SetWorkers(t.workers)
	return tape
}

// dropoutSeed is the seed of the rank's dropout streams: distinct per
// data-parallel replica and, as Megatron's _set_random_seed offsets it by
// 100·pp_rank, per pipeline stage.
func (t *trainer) dropoutSeed() uint64 { return rng.SplitMix64(t.seedBase()) }

// seedBase is the rank's seed before mixing: --seed + 1 + dp_rank +
// 100·pp_rank, with dp_rank the rank in the dp×cp group: every replica and
// every context-parallel rank (which holds other tokens) draws its own
// dropout masks.
func (t *trainer) seedBase() uint64 {
	return t.a.Seed + 1 + uint64(t.dpg.Rank()) + 100*uint64(t.pp.Rank())
}

// buildChunks builds the rank's model chunks: chunk v of pipeline rank p
// holds what the config's pipeline layout places there. Every chunk starts
// from the whole one-rank model's weights for the layers it holds.
func (t *trainer) buildChunks() error {
	all, err := t.a.Model.PipelineChunks()
	if err != nil {
		return err
	}
	for _, c := range all[t.pp.Rank()] {
		m, err := gpt.NewChunk(t.a.Model, rng.New(t.a.Seed), t.tp, gpt.SpecOf(c), gpt.WithExperts(t.expertGroups()), gpt.WithContextParallel(t.cp))
		if err != nil {
			return err
		}
		t.chunks = append(t.chunks, m)
	}
	return nil
}

// expertGroups are the expert grid's groups the MoE layers span.
func (t *trainer) expertGroups() moe.Parallel {
	g := t.groups
	return moe.Parallel{EP: g.Get(mesh.GroupEP), ETP: g.Get(mesh.GroupExptTP), TPEP: g.Get(mesh.GroupTPEP), TPCP: g.Get(mesh.GroupTPCP)}
}

// newP2P builds the pipeline communicators: one for the activations and,
// when the placement sends activations and gradients both ways between
// two ranks (the V), one for the gradients on a group of their own.
func (t *trainer) newP2P(ctx context.Context) error {
	if t.pp.Size() == 1 {
		return nil
	}
	cfg := p2p.ConfigFrom(&t.a.Model.ModelParallelConfig)
	cfg.Timers = t.timersFunc()
	cfg.MTPStandalone = false // the schedules pass the shapes (trainer.pipelineP2P)
	var err error
	if t.p2p, err = p2p.New(t.pp, cfg); err != nil || !t.a.Model.PipelinePlacement.GradientsApart() {
		return err
	}
	ranks := make([]int, t.pp.Size())
	for i := range ranks {
		ranks[i] = i
	}
	g, err := t.pp.NewSubgroups(ctx, "pipeline gradients", [][]int{ranks})
	if err != nil {
		return err
	}
	t.p2pGrad, err = p2p.New(g, cfg)
	return err
}

// timersFunc is the config's TimersFunc of --timing-log-level (nil: no
// timing).
func (t *trainer) timersFunc() config.TimersFunc {
	if t.timers == nil {
		return nil
	}
	return t.timers.get
}

// firstStage and lastStage report whether the rank holds the first or the
// last stage of the model (the embedding's, the loss's): pipeline ranks 0
// and P−1, or under the V placement rank 0 both.
func (t *trainer) firstStage() bool {
	first, _ := t.a.Model.PipelinePlacement.Ends(t.pp.Size())
	return t.pp.Rank() == first
}
func (t *trainer) lastStage() bool { return t.pp.Rank() == t.lossRank() }

// lossRank is the pipeline rank holding the last stage, which computes
// the loss.
func (t *trainer) lossRank() int {
	_, last := t.a.Model.PipelinePlacement.Ends(t.pp.Size())
	return last
}

// normParams are the parameters the gradient norm counts on this rank:
// every chunk's, except the last stage's copy of the shared word embedding
// when the first stage holds the original (a tied weight counts once).
func (t *trainer) normParams() []*nn.Parameter {
	var out []*nn.Parameter
	for _, c := range t.chunks {
		for _, p := range c.Parameters() {
			if p.Shared {
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// sharedEmbeddings are the word-embedding weights this rank holds for the
// embedding group's gradient all-reduce: every chunk's that holds the
// weight or a copy (the first stage's, the tied output layer's, the MTP
// depths'; config.HoldsWordEmbedding), in chunk order. Nothing when no
// other rank holds one (config.TransformerConfig.WordEmbeddingShared).
func (t *trainer) sharedEmbeddings() []*nn.Parameter {
	if !t.a.Model.WordEmbeddingShared() {
		return nil
	}
	var out []*nn.Parameter
	for _, c := range t.chunks {
		if c.WordEmbeddings != nil {
			out = append(out, c.WordEmbeddings)
		}
	}
	return out
}

// positionEmbeddings are the position embeddings this rank holds (the
// first stage's, learned absolute positions only), summed over the
// position-embedding group.
func (t *trainer) positionEmbeddings() []*nn.Parameter {
	if t.pp.Size() == 1 || !t.firstStage() || t.chunks[0].PositionEmbeddings == nil {
		return nil
	}
	return []*nn.Parameter{t.chunks[0].PositionEmbeddings}
}

// stepResult is what one iteration reports.
type stepResult struct {
	loss float64
	// mtpLosses are the multi-token-prediction depths' losses (nil
	// without).
	mtpLosses []float64
	gradNorm  float64 // NaN when the step was skipped
	// paramsNorm and numZeros are --log-params-norm's and
	// --log-num-zeros-in-grad's figures: NaN when not asked for, and
	// numZeros when the step was skipped.
	paramsNorm, numZeros float64
	lr                   float64
	// skipped reports an optimizer step skipped for a non-finite
	// gradient; lossScale is the loss scale the iteration ran with (NaN:
	// no loss scaling).
	skipped   bool
	lossScale float64
	elapsed   time.Duration
	// peakActivation is the rank's largest activation memory (bytes saved
	// for backward) during the iteration; peakActivations holds every
	// rank's, gathered when --log-json asks for them.
	peakActivation  int64
	peakActivations []int64
	// globalBatch is the iteration's global batch; consumed the samples
	// consumed once it ran.
	globalBatch int
	consumed    int64
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

// dumpGrads writes the first step's gradients as whole tensors under
// their Megatron names (--dump-grads): saved as a distributed checkpoint
// of the gradients into DumpGrads.parts (every rank its pieces, by the
// checkpoint's own protocol and ownership rules), then read back whole by
// rank 0 (ckpt.ToWhole), written as one safetensors file, and removed.
func (t *trainer) dumpGrads(ctx context.Context) error {
	for _, d := range t.allDDPs() {
		if err := d.AllGatherGrads(ctx); err != nil {
			return fmt.Errorf("--dump-grads: %w", err)
		}
	}
	parts := t.a.DumpGrads + ".parts"
	var m *ckpt.Manifest
	if t.groups.World.Rank() == 0 {
		if err := os.RemoveAll(parts); err != nil {
			return fmt.Errorf("--dump-grads: %w", err)
		}
		m = &ckpt.Manifest{Iteration: 1, Tensors: map[string][]int{}}
		for name, shape := range gpt.ParameterShapes(t.a.Model) {
			m.Tensors[ckpt.ModelKey+name] = shape
		}
	}
	s := &ckpt.Saver{World: t.groups.World, Dir: parts}
	if err := s.Begin(ctx, 1, m); err != nil {
		return fmt.Errorf("--dump-grads: %w", err)
	}
	if _, err := s.Write(ctx, t.gradPieces(), false); err != nil {
		return fmt.Errorf("--dump-grads: %w", err)
	}
	if t.groups.World.Rank() != 0 {
		return nil
	}
	if err := writeWhole(parts, t.a.DumpGrads); err != nil {
		return fmt.Errorf("--dump-grads: %w", err)
	}
	return os.RemoveAll(parts)
}

// writeWhole writes the model tensors of the checkpoint in dir, whole, to
// the safetensors file path.
func writeWhole(dir, path string) error {
	r, err := ckpt.Open(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	c, err := ckpt.ToWhole(r)
	if err != nil {
		return err
	}
	return safetensors.WriteFile(path, c.Model, map[string]string{"iteration": "1"})
}

// gradPieces are this rank's pieces of the whole gradients: every
// parameter's whole local gradient, written once (writesOnce) by its
// first data-parallel replica.
func (t *trainer) gradPieces() []ckpt.PieceData {
	whole := gpt.ParameterShapes(t.a.Model)
	var out []ckpt.PieceData
	for _, p := range t.params {
		if !t.writesOnce(p, t.firstReplica) {
			continue
		}
		g := p.Grad.Float32().Contiguous().Data()
		out = append(out, t.sharded(ckpt.ModelKey+p.Name, p, whole[p.Name], 0, g).Pieces()...)
	}
	return out
}
