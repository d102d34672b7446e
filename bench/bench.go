package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/dnnl"
	"github.com/gotron/gotron/train"
)

// Options select what Run, RunRank and Gemm measure.
type Options struct {
	Configs []string // "small", "medium"
	Iters   int      // timed iterations after one warm-up
	Threads int      // cores (0: all), divided among the ranks
	// TensorParallel runs each configuration on this many tensor-parallel
	// ranks (0 or 1: one rank); SequenceParallel adds sequence parallelism.
	TensorParallel   int
	SequenceParallel bool
	// PipelineParallel runs each configuration on this many pipeline
	// stages (0 or 1: none), with VirtualPipeline model chunks per
	// stage (0: not interleaved); Microbatches is the number of
	// microbatches per iteration of each data-parallel replica (0: 1), the
	// global batch is that many micro-batches times the data-parallel size.
	PipelineParallel, VirtualPipeline, Microbatches int
	// ContextParallel splits every sequence over this many ranks (0 or 1:
	// none), attention crossing them as CPCommType says ("": p2p);
	// Hierarchical gives a2a+p2p's levels.
	ContextParallel int
	CPCommType      string
	Hierarchical    []int
	// ExpertParallel spreads a MoE configuration's experts over this many
	// of the ranks (0 or 1: none), routing with Dispatcher ("": the
	// default, allgather).
	ExpertParallel int
	Dispatcher     string
	// DataParallel is the number of data-parallel replicas (0 or 1: one).
	// Run runs them as in-process ranks; under RunRank the data-parallel
	// size is the world's size over TP·PP, and DataParallel, when set, must
	// equal it.
	DataParallel int
	// DDP configures the data-parallel wrapper and the optimizer (nil: the
	// training defaults, those of `gotron train`); AlignParamGather
	// overrides its align_param_gather as Args.AlignParamGather does.
	DDP              *config.DDPConfig
	AlignParamGather *bool
	// PipelineSchedule is --pipeline-schedule ("": 1F1B; "zb-h1", "zb-h2",
	// "zb-v").
	PipelineSchedule string
	// PipelineLayout is --pipeline-model-parallel-layout: the stages'
	// layers by a layout string instead of the even split ("": even).
	PipelineLayout string
	// DeferEmbeddingWgrad and WgradDeferralLimit are
	// --defer-embedding-wgrad-compute and --wgrad-deferral-limit.
	DeferEmbeddingWgrad bool
	WgradDeferralLimit  int
	// BF16 and FP16 ask for mixed precision, with Precision's settings
	// (nil: the defaults), as training does.
	BF16, FP16 bool
	Precision  *train.Precision
	// Breakdown profiles the timed iterations of each configuration (the
	// CPU time of every rank in this process) and prints it by phase
	// (Breakdown), then, when the process runs one rank, the wall time
	// and rate of each GEMM shape inside the step (tensor.TimeGemms).
	Breakdown bool
}

// precision names the parameters' type and what runs the bf16 GEMMs.
func precision(o Options) string {
	switch {
	case o.BF16:
		p, _ := dnnl.Plan() // train.Prepare (or Gemm) has refused a plan that errs
		return "bf16 (" + p.String() + ")"
	case o.FP16:
		return "fp16 (GEMMs on float16 values in float32)"
	}
	return "fp32"
}

// Config is a benchmark model.
type Config struct {
	Name                              string
	Layers, Hidden, Heads, Seq, Vocab int
	MicroBatch                        int
	// Llama shapes the model as Llama-class GPTs are: RMSNorm, SwiGLU
	// (ffn_hidden_size = config.SwiGLUFFN(h)), RoPE, grouped-query
	// attention with Heads/2 groups, an untied output layer, no biases.
	Llama bool
	// Experts > 0 makes every layer a MoE layer of that many experts of
	// width ExpertFFN, TopK of them per token (softmax routing, the
	// load-balancing loss 0.01; the grouped GEMM), without biases.
	Experts, TopK, ExpertFFN int
}

// model returns the configuration's model options on m.
func (c Config) model(m *config.TransformerConfig) {
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads = c.Layers, c.Hidden, c.Heads
	m.SeqLength, m.MaxPositionEmbeddings, m.VocabSize = c.Seq, c.Seq, c.Vocab
	if c.Llama {
		m.Normalization, m.ActivationFunc, m.GatedLinearUnit = config.RMSNormType, config.SiLU, true
		m.PositionEmbeddingType, m.NumQueryGroups = config.RoPE, c.Heads/2
		m.ShareEmbeddingsAndOutputWeights, m.AddBiasLinear = false, false
	}
	if c.Experts > 0 {
		m.NumMoEExperts, m.MoERouterTopK, m.MoEFFNHiddenSize = c.Experts, c.TopK, c.ExpertFFN
		m.MoEAuxLossCoeff, m.AddBiasLinear, m.MoEGroupedGEMM = 0.01, false, true
	}
}

// configs are the benchmark models: small and medium.
var configs = map[string]Config{
	"small":  {Name: "small", Layers: 4, Hidden: 256, Heads: 8, Seq: 256, Vocab: 1024, MicroBatch: 8},
	"medium": {Name: "medium", Layers: 6, Hidden: 512, Heads: 8, Seq: 512, Vocab: 8192, MicroBatch: 4},
	// medium-llama is medium shaped as a Llama-class model.
	"medium-llama": {Name: "medium-llama", Layers: 6, Hidden: 512, Heads: 8, Seq: 512, Vocab: 8192, MicroBatch: 4, Llama: true},
	// medium-moe is medium-llama with 8 experts of width 672 in every
	// layer, 2 per token: the active MLP width is medium-llama's 1344.
	"medium-moe": {Name: "medium-moe", Layers: 6, Hidden: 512, Heads: 8, Seq: 512, Vocab: 8192, MicroBatch: 4, Llama: true, Experts: 8, TopK: 2, ExpertFFN: 672},
	// long is the context-parallel benchmark: one sequence of 4096 tokens.
	"long": {Name: "long", Layers: 4, Hidden: 256, Heads: 8, Seq: 4096, Vocab: 1024, MicroBatch: 1},
}

// FLOPs returns the model FLOPs of one training iteration over tokens
// tokens (gpt.TrainingFLOPs of the configuration's model).
func (c Config) FLOPs(tokens int) float64 {
	m := config.DefaultTransformerConfig()
	c.model(&m)
	return gpt.TrainingFLOPs(m, tokens)
}

// Result is one configuration's measurement.
type Result struct {
	Config     Config
	TokensPerS float64
	GFLOPs     float64
	PeakRSS    int64 // bytes, the process's peak resident set during the run
	StepMS     float64
	// Bubble is the measured pipeline bubble of the last iteration (the
	// busiest rank's idle fraction), Idle the mean idle fraction of the
	// ranks (bubble plus load imbalance) and TheoreticalBubble the
	// schedule's at equal forward, backward and weight-gradient times
	// (pp.EqualTimesBubble: (P−1)/(V·M+P−1) for 1F1B and the interleaved
	// schedule); all 0 without pipelining.
	Bubble, Idle, TheoreticalBubble float64
	// CPWait is the fraction of world rank 0's timed iterations that ring
	// attention spent blocked on receives after its block computation: the
	// context-parallel transfers not hidden (0 without a ring).
	CPWait float64
	// Buckets is the number of gradient buckets of world rank 0 (over all
	// its model chunks).
	Buckets int
	// Phases is where the timed iterations' CPU time went (with
	// Options.Breakdown).
	Phases *Breakdown
	// Gemms is the wall time of the timed iterations' GEMMs per shape,
	// summed over GemmIters iterations, the longest first (with
	// Options.Breakdown, when this process ran one rank:
	// tensor.TimeGemms times the whole process).
	Gemms     []tensor.GemmTime
	GemmIters int
	// AdamMS is the mean time of the optimizer's Adam update on world rank
	// 0 (its shards under the distributed optimizer) and GatherMS that of
	// the distributed optimizer's parameter all-gather (0 without it):
	// train.Rank.TimeOptimizerStep.
	AdamMS, GatherMS float64
	// FirstMS is the time of the first (warm-up, untimed) iteration on
	// world rank 0: the cost of a cold start beside StepMS.
	FirstMS float64
}

// Run trains each configuration on mock data for o.Iters timed
// iterations, its ranks (TP × PP × DP) as goroutines of this process, and
// prints tokens/s, achieved GFLOP/s, peak memory, the iteration's time and
// the optimizer step's.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.DataParallel < 0 {
		return fmt.Errorf("--data-parallel-size %d: must be at least 1", o.DataParallel)
	}
	n := max(o.TensorParallel, 1) * max(o.PipelineParallel, 1) * max(o.ContextParallel, 1) * max(o.DataParallel, 1)
	runs, err := prepareAll(o, train.Placement{World: n, Machine: n, Process: n})
	if err != nil {
		return err
	}
	return bench(ctx, w, o, runs, n, fmt.Sprintf("%d in-process ranks", n), func(ctx context.Context, fn func(context.Context, comm.Group) error) error {
		return local.NewWorld(n, comm.Options{Timeout: time.Hour}).Run(ctx, fn)
	})
}

// RunRank is Run as one rank of a multi-process job (one process per
// rank, under mpirun): every process calls it with its world group; world
// rank 0 writes to w. localRanks is how many ranks share this machine (the
// cores are divided among them). The data-parallel size is world / (TP·PP).
func RunRank(ctx context.Context, world comm.Group, w io.Writer, o Options, localRanks int) error {
	n := world.Size()
	mp := max(o.TensorParallel, 1) * max(o.PipelineParallel, 1) * max(o.ContextParallel, 1)
	if dp := n / mp; o.DataParallel != 0 && (n%mp != 0 || o.DataParallel != dp) {
		return fmt.Errorf("--data-parallel-size %d: the job has %d processes and tensor × pipeline × context parallel size %d, so the data-parallel size is %d/%d: drop --data-parallel-size or run mpirun -np %d",
			o.DataParallel, n, mp, n, mp, o.DataParallel*mp)
	}
	runs, err := prepareAll(o, train.Placement{World: n, Machine: localRanks, Process: 1})
	if err != nil {
		return err
	}
	if world.Rank() != 0 {
		w = io.Discard
	}
	return bench(ctx, w, o, runs, n, fmt.Sprintf("%d MPI processes (peak memory: rank 0's process)", n),
		func(ctx context.Context, fn func(context.Context, comm.Group) error) error { return fn(ctx, world) })
}

// prepareAll prepares the training run of every configuration of o at
// placement pl (train.Prepare: the arguments validated, the memory
// checked, the GEMM kernels settled, the mock data opened), so that a
// configuration that cannot run stops the benchmark before any runs.
func prepareAll(o Options, pl train.Placement) ([]*train.Prepared, error) {
	var out []*train.Prepared
	for _, name := range o.Configs {
		c, ok := configs[name]
		if !ok {
			return nil, fmt.Errorf("--configs: unknown configuration %q (known: small, medium, medium-llama, medium-moe, long)", name)
		}
		p, err := train.Prepare(argsFor(c, o, pl.World), train.Options{}, pl)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// argsFor returns the training arguments of configuration c under o for
// a world of n ranks.
func argsFor(c Config, o Options, n int) train.Args {
	a := train.DefaultArgs()
	c.model(&a.Model)
	a.Model.HiddenDropout, a.Model.AttentionDropout = 0, 0
	a.Model.BF16, a.Model.FP16 = o.BF16, o.FP16
	if o.Precision != nil {
		a.Precision = *o.Precision
	}
	a.Model.TensorModelParallelSize, a.Model.SequenceParallel = max(o.TensorParallel, 1), o.SequenceParallel
	a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = max(o.PipelineParallel, 1), o.VirtualPipeline
	a.Model.ContextParallelSize, a.Model.HierarchicalContextParallelSizes = max(o.ContextParallel, 1), o.Hierarchical
	if o.CPCommType != "" {
		a.Model.CPCommType = []string{o.CPCommType}
	}
	if c.Experts > 0 {
		a.Model.ExpertModelParallelSize = max(o.ExpertParallel, 1)
		if o.Dispatcher != "" {
			a.Model.MoETokenDispatcherType = o.Dispatcher
		}
	}
	if o.DDP != nil {
		a.DDP = *o.DDP
	}
	a.AlignParamGather = o.AlignParamGather
	a.PipelineSchedule = o.PipelineSchedule
	a.Model.PipelineModelParallelLayout = o.PipelineLayout
	a.Model.DeferEmbeddingWgradCompute, a.Model.WgradDeferralLimit = o.DeferEmbeddingWgrad, o.WgradDeferralLimit
	a.MicroBatchSize = c.MicroBatch
	if dp := a.DataParallelSize(n); dp > 0 {
		a.GlobalBatchSize = c.MicroBatch * max(o.Microbatches, 1) * dp
	}
	a.TrainIters = 1 + max(o.Iters, 1)
	a.MockData = true
	a.EvalIters = 0
	a.Threads = o.Threads
	a.LogInterval = a.TrainIters
	a.WorldSize = n
	return a
}

// bench prints the header and one line per configuration, each prepared
// run started by run on n ranks; where says how the ranks run.
func bench(ctx context.Context, w io.Writer, o Options, runs []*train.Prepared, n int, where string,
	run func(context.Context, func(context.Context, comm.Group) error) error) error {
	dp := 1
	if len(runs) > 0 {
		dp = runs[0].Args().DataParallelSize(n)
	}
	layout := layoutDesc(o, dp)
	if n > 1 {
		layout += "; " + where
	}
	layout += fmt.Sprintf("; %d microbatch(es) per iteration", max(o.Microbatches, 1))
	if dp > 1 {
		layout += " per data-parallel replica"
	}
	fmt.Fprintf(w, "gotron bench: %s, %d core(s), %s, GEMM %s, %s\n",
		layout, threadsOr(o.Threads), precision(o), tensor.GemmLibraries(), time.Now().Format("2006-01-02"))
	if warn := tensor.GemmWarning(); warn != "" {
		fmt.Fprintf(w, "gotron bench: warning: %s\n", warn)
	}
	fmt.Fprintf(w, "%-12s %7s %7s %6s %5s %6s %5s %12s %10s %12s %10s %8s %8s %8s %8s %9s %9s %9s %8s\n", "config", "layers", "hidden", "heads", "seq", "vocab", "micro",
		"tokens/s", "GFLOP/s", "peak MiB", "step ms", "bubble", "theory", "idle", "buckets", "adam ms", "gather ms", "first ms", "cp wait")
	for i, p := range runs {
		c := configs[o.Configs[i]]
		r, err := runOne(ctx, c, p, n, o.Breakdown, run)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-12s %7d %7d %6d %5d %6d %5d %12.0f %10.1f %12.0f %10.1f %7.1f%% %7.1f%% %7.1f%% %8d %9.1f %9.1f %9.1f %7.1f%%\n", c.Name, c.Layers, c.Hidden, c.Heads, c.Seq, c.Vocab, c.MicroBatch,
			r.TokensPerS, r.GFLOPs, float64(r.PeakRSS)/(1<<20), r.StepMS, 100*r.Bubble, 100*r.TheoreticalBubble, 100*r.Idle, r.Buckets, r.AdamMS, r.GatherMS, r.FirstMS, 100*r.CPWait)
		if r.Phases != nil {
			fmt.Fprintf(w, "phases of %s (CPU time of the timed iterations, %s in all): %v\n", c.Name, r.Phases.Total.Round(time.Millisecond), r.Phases)
		}
		printGemmTimes(w, c, threadsOr(o.Threads), r)
	}
	return nil
}

// layoutDesc describes the parallel layout and the data-parallel
// settings for the header line.
func layoutDesc(o Options, dp int) string {
	var parts []string
	if tp := max(o.TensorParallel, 1); tp > 1 {
		s := fmt.Sprintf("tensor parallel %d", tp)
		if o.SequenceParallel {
			s += " + sequence parallel"
		}
		parts = append(parts, s)
	}
	if n := max(o.ExpertParallel, 1); n > 1 {
		d := o.Dispatcher
		if d == "" {
			d = "allgather"
		}
		parts = append(parts, fmt.Sprintf("expert parallel %d (%s)", n, d))
	}
	if n := max(o.ContextParallel, 1); n > 1 {
		c := o.CPCommType
		if c == "" {
			c = "p2p"
		}
		if len(o.Hierarchical) > 0 {
			c += fmt.Sprintf(" %v", o.Hierarchical)
		}
		parts = append(parts, fmt.Sprintf("context parallel %d (%s)", n, c))
	}
	if p := max(o.PipelineParallel, 1); p > 1 {
		s := fmt.Sprintf("pipeline parallel %d", p)
		if v := o.VirtualPipeline; v > 0 {
			s += fmt.Sprintf(" with %d model chunks per rank", v)
		}
		if o.PipelineSchedule != "" {
			s += " (" + o.PipelineSchedule + ")"
		}
		if o.PipelineLayout != "" {
			s += ", layout " + o.PipelineLayout
		}
		if o.DeferEmbeddingWgrad {
			s += fmt.Sprintf(", output-layer weight gradients deferred (limit %d)", o.WgradDeferralLimit)
		}
		parts = append(parts, s)
	}
	if dp > 1 {
		parts = append(parts, dataParallelLayout(o, dp))
	}
	if len(parts) == 0 {
		return "one rank"
	}
	return strings.Join(parts, ", ")
}

// dataParallelLayout describes dp data-parallel replicas and how their
// gradients and parameters are reduced and gathered.
func dataParallelLayout(o Options, dp int) string {
	d := train.DefaultArgs().DDP
	if o.DDP != nil {
		d = *o.DDP
	}
	d.Finalize() // Megatron-FSDP's implied settings, as training applies them
	s := fmt.Sprintf("data parallel %d", dp)
	if d.ShardsGradients() {
		s += fmt.Sprintf(", Megatron-FSDP %s: each layer's gradients reduce-scattered into shards as backward completes them", d.DataParallelShardingStrategy)
		if d.ShardsParameters() {
			s += ", its parameters gathered for its forward and backward (the next prefetched)"
		}
		return s
	}
	switch {
	case d.OverlapGradReduce && d.NumBuckets > 0:
		s += fmt.Sprintf(", gradient reduction overlapped with backward (%d buckets asked)", d.NumBuckets)
	case d.OverlapGradReduce && d.BucketSize > 0:
		s += fmt.Sprintf(", gradient reduction overlapped with backward (buckets of %d elements)", d.BucketSize)
	case d.OverlapGradReduce:
		s += ", gradient reduction overlapped with backward (default bucket size)"
	default:
		s += ", gradients reduced after backward (one bucket)"
	}
	if d.UseDistributedOptimizer {
		s += ", distributed optimizer"
		if d.OverlapParamGather {
			s += " with overlapped parameter all-gather"
		}
	}
	return s
}

func threadsOr(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// runOne trains configuration c, prepared as p, on n ranks started by run,
// and measures world rank 0: the mean time of the timed iterations (the
// first one warms up), then the mean time of the optimizer step over as
// many extra steps (train.Rank.TimeOptimizerStep).
func runOne(ctx context.Context, c Config, p *train.Prepared, n int, breakdown bool,
	run func(context.Context, func(context.Context, comm.Group) error) error) (Result, error) {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	m := &measurement{a: p.Args(), breakdown: breakdown}
	defer func() { _ = m.prof.stop() }() // a run that failed while profiling
	err := run(ctx, func(ctx context.Context, g comm.Group) error {
		m.ranksHere.Add(1)
		r, err := p.NewRank(ctx, g)
		if err != nil {
			return err
		}
		if err := m.train(ctx, r, g.Rank() == 0); err != nil {
			return err
		}
		return m.optimizer(ctx, r, g.Rank() == 0)
	})
	if err != nil {
		return Result{}, err
	}
	return m.result(c, n), nil
}

// measurement is what runOne measures on world rank 0.
type measurement struct {
	a         train.Args
	breakdown bool
	steps     []time.Duration // the timed iterations
	first     time.Duration   // the warm-up iteration
	adam      time.Duration   // the optimizer steps' updates, summed
	gather    time.Duration   // and their parameter all-gathers
	bub, idle float64         // the profiled iteration's bubble
	buckets   int
	cpWait    time.Duration // ring attention's blocked receives in the timed iterations
	firstWait time.Duration // and in the warm-up
	prof      *cpuProfile   // --breakdown's profile of the timed iterations
	ranksHere atomic.Int32  // the ranks this process runs
}

// train runs the iterations (the last one's timeline recorded under
// pipelining) and, on rank 0 (measure), records their times and, with
// breakdown, profiles the timed ones.
func (m *measurement) train(ctx context.Context, r *train.Rank, measure bool) error {
	a := m.a
	for r.Iteration() < a.TrainIters {
		last := r.Iteration() == a.TrainIters-1
		s, err := r.Step(ctx, train.StepOptions{Timeline: a.Model.PipelineModelParallelSize > 1 && last})
		if err != nil {
			return err
		}
		if !measure {
			continue
		}
		if s.Iteration > 1 {
			m.steps = append(m.steps, s.Elapsed)
			m.cpWait = r.CPWait() - m.firstWait
		} else { // the first iteration warms up
			m.first = s.Elapsed
			m.firstWait = r.CPWait()
		}
		if err := m.profile(s.Iteration); err != nil {
			return err
		}
		if s.Timeline != nil {
			bb := s.Timeline.Bubbles()
			m.bub, m.idle = pp.Bubble(bb), pp.MeanBubble(bb)
		}
	}
	return nil
}

// profile starts --breakdown's profile after the warm-up iteration and
// stops it after the last.
func (m *measurement) profile(iteration int) error {
	if !m.breakdown {
		return nil
	}
	switch iteration {
	case 1:
		var err error
		m.prof, err = startProfile()
		return err
	case m.a.TrainIters:
		return m.prof.stop()
	}
	return nil
}

// optimizer times as many optimizer steps as there were timed iterations
// and counts the buckets, on rank 0 (measure).
func (m *measurement) optimizer(ctx context.Context, r *train.Rank, measure bool) error {
	for range m.a.TrainIters - 1 {
		ad, ga, err := r.TimeOptimizerStep(ctx)
		if err != nil {
			return err
		}
		if measure {
			m.adam, m.gather = m.adam+ad, m.gather+ga
		}
	}
	if measure {
		m.buckets = r.Buckets()
	}
	return nil
}

// result is the measurement of configuration c on n ranks (only the
// configuration on a rank that measured nothing).
func (m *measurement) result(c Config, n int) Result {
	a := m.a
	if len(m.steps) == 0 { // not world rank 0: nothing measured here
		return Result{Config: c}
	}
	var total time.Duration
	for _, s := range m.steps {
		total += s
	}
	avg := total / time.Duration(len(m.steps))
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	micro, p, optSteps := a.NumMicroBatches(a.DataParallelSize(n)), a.Model.PipelineModelParallelSize, a.TrainIters-1
	tokens := c.MicroBatch * c.Seq * micro * a.DataParallelSize(n)
	res := Result{Config: c, TokensPerS: float64(tokens) / avg.Seconds(), GFLOPs: c.FLOPs(tokens) / avg.Seconds() / 1e9,
		PeakRSS: peakRSS(), StepMS: ms(total, len(m.steps)), Bubble: m.bub, Idle: m.idle, Buckets: m.buckets,
		AdamMS: ms(m.adam, optSteps), GatherMS: ms(m.gather, optSteps), FirstMS: ms(m.first, 1),
		CPWait: float64(m.cpWait) / float64(total)}
	if p > 1 {
		mp := a.Model.ModelParallelConfig
		res.TheoreticalBubble, _ = pp.EqualTimesBubble(pp.Config{PP: p, VPP: mp.VirtualPipelineModelParallelSize, Microbatches: micro,
			OverlapP2PComm: mp.OverlapP2PComm, BatchP2PComm: mp.BatchP2PComm, Schedule: a.PipelineSchedule})
	}
	if m.prof != nil {
		res.Phases = &m.prof.phases
		if m.ranksHere.Load() == 1 {
			res.Gemms, res.GemmIters = m.prof.gemms, len(m.steps)
		}
	}
	return res
}

// resetPeakRSS resets the kernel's record of the process's peak resident
// set (Linux: writing 5 to /proc/self/clear_refs). Elsewhere it does nothing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns the process's peak resident set size (VmHWM) in bytes, or
// 0 where /proc is not available.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
