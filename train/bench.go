package train

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
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/tensor/blas"
)

// BenchOptions select what Bench measures.
type BenchOptions struct {
	Configs []string // "small", "medium"
	Iters   int      // timed iterations after one warm-up
	Threads int      // cores (0: all), divided among the ranks
	// TensorParallel runs each configuration on this many in-process
	// tensor-parallel ranks (0 or 1: one rank); SequenceParallel adds
	// sequence parallelism.
	TensorParallel   int
	SequenceParallel bool
	// PipelineParallel runs each configuration on this many in-process
	// pipeline stages (0 or 1: none), with VirtualPipeline model chunks per
	// stage (0: not interleaved); Microbatches is the number of
	// microbatches per iteration (0: 1), the global batch is that many
	// micro-batches.
	PipelineParallel, VirtualPipeline, Microbatches int
}

// BenchConfig is a benchmark model.
type BenchConfig struct {
	Name                              string
	Layers, Hidden, Heads, Seq, Vocab int
	MicroBatch                        int
}

// benchConfigs are the benchmark models: small and medium.
var benchConfigs = map[string]BenchConfig{
	"small":  {Name: "small", Layers: 4, Hidden: 256, Heads: 8, Seq: 256, Vocab: 1024, MicroBatch: 8},
	"medium": {Name: "medium", Layers: 6, Hidden: 512, Heads: 8, Seq: 512, Vocab: 8192, MicroBatch: 4},
}

// FLOPs returns the training FLOPs of one iteration over T tokens:
// 6·T·(12·L·h² + V·h) + 12·L·h·s·T (Narayanan et al. 2021, arXiv
// 2104.04473, with the logit layer and the full s×s attention square).
func (c BenchConfig) FLOPs(tokens int) float64 {
	T, L, h, s, V := float64(tokens), float64(c.Layers), float64(c.Hidden), float64(c.Seq), float64(c.Vocab)
	return 6*T*(12*L*h*h+V*h) + 12*L*h*s*T
}

// BenchResult is one configuration's measurement.
type BenchResult struct {
	Config     BenchConfig
	TokensPerS float64
	GFLOPs     float64
	PeakRSS    int64 // bytes, the process's peak resident set during the run
	StepMS     float64
	// Bubble is the measured pipeline bubble of the last iteration (the
	// busiest rank's idle fraction), Idle the mean idle fraction of the
	// ranks (bubble plus load imbalance) and TheoreticalBubble
	// (P−1)/(V·M+P−1); all 0 without pipelining.
	Bubble, Idle, TheoreticalBubble float64
}

// Bench trains each configuration on mock data on one rank for o.Iters
// timed iterations and prints tokens/s, achieved GFLOP/s and peak memory.
func Bench(ctx context.Context, w io.Writer, o BenchOptions) error {
	layout := "one rank"
	if tp := max(o.TensorParallel, 1); tp > 1 {
		layout = fmt.Sprintf("tensor parallel %d (in-process ranks)", tp)
		if o.SequenceParallel {
			layout += " + sequence parallel"
		}
	}
	if p := max(o.PipelineParallel, 1); p > 1 {
		layout = fmt.Sprintf("pipeline parallel %d (in-process ranks)", p)
		if v := o.VirtualPipeline; v > 0 {
			layout += fmt.Sprintf(", %d model chunks per rank", v)
		}
	}
	layout += fmt.Sprintf(", %d microbatch(es) per iteration", max(o.Microbatches, 1))
	fmt.Fprintf(w, "gotron bench: %s, %d core(s), BLAS %s (OPENBLAS_CORETYPE=%q), %s\n",
		layout, threadsOr(o.Threads), blas.Kernel(), os.Getenv("OPENBLAS_CORETYPE"), time.Now().Format("2006-01-02"))
	fmt.Fprintf(w, "%-8s %7s %7s %6s %5s %6s %5s %12s %10s %12s %10s %8s %8s %8s\n", "config", "layers", "hidden", "heads", "seq", "vocab", "micro", "tokens/s", "GFLOP/s", "peak MiB", "step ms", "bubble", "theory", "idle")
	for _, name := range o.Configs {
		c, ok := benchConfigs[name]
		if !ok {
			return fmt.Errorf("--configs: unknown configuration %q (known: small, medium)", name)
		}
		r, err := benchOne(ctx, c, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-8s %7d %7d %6d %5d %6d %5d %12.0f %10.1f %12.0f %10.1f %7.1f%% %7.1f%% %7.1f%%\n", c.Name, c.Layers, c.Hidden, c.Heads, c.Seq, c.Vocab, c.MicroBatch,
			r.TokensPerS, r.GFLOPs, float64(r.PeakRSS)/(1<<20), r.StepMS, 100*r.Bubble, 100*r.TheoreticalBubble, 100*r.Idle)
	}
	return nil
}

func threadsOr(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}

func benchOne(ctx context.Context, c BenchConfig, o BenchOptions) (BenchResult, error) {
	a := DefaultArgs()
	a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads = c.Layers, c.Hidden, c.Heads
	a.Model.SeqLength, a.Model.MaxPositionEmbeddings, a.Model.VocabSize = c.Seq, c.Seq, c.Vocab
	a.Model.HiddenDropout, a.Model.AttentionDropout = 0, 0
	m := max(o.Microbatches, 1)
	a.MicroBatchSize, a.GlobalBatchSize = c.MicroBatch, c.MicroBatch*m
	a.TrainIters = 1 + max(o.Iters, 1)
	a.MockData = true
	a.EvalIters = 0
	a.Threads = o.Threads
	a.LogInterval = a.TrainIters
	tp, p := max(o.TensorParallel, 1), max(o.PipelineParallel, 1)
	n := tp * p
	a.Model.TensorModelParallelSize, a.Model.SequenceParallel = tp, o.SequenceParallel
	a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = p, o.VirtualPipeline
	a.WorldSize = n
	a = normalise(a, n)
	if err := a.Validate(n); err != nil {
		return BenchResult{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	var steps []time.Duration
	var bub, idle float64
	ds, err := openData(a)
	if err != nil {
		return BenchResult{}, err
	}
	world := local.NewWorld(n, comm.Options{Timeout: time.Hour})
	err = world.Run(ctx, func(ctx context.Context, g comm.Group) error {
		t, err := newTrainer(ctx, g, a, ds, n)
		if err != nil {
			return err
		}
		for t.iteration < a.TrainIters {
			var r stepResult
			var tl *timeline
			var err error
			if p > 1 && t.iteration == a.TrainIters-1 {
				r, tl, err = t.profiledStep(ctx)
			} else {
				r, err = t.step(ctx)
			}
			if err != nil {
				return err
			}
			if t.iteration > 1 && g.Rank() == 0 { // the first iteration warms up
				steps = append(steps, r.elapsed)
			}
			if tl != nil {
				b := tl.bubbles()
				bub, idle = bubble(b), meanBubble(b)
			}
		}
		return nil
	})
	if err != nil {
		return BenchResult{}, err
	}
	var total time.Duration
	for _, s := range steps {
		total += s
	}
	avg := total / time.Duration(len(steps))
	tokens := c.MicroBatch * c.Seq * m
	res := BenchResult{Config: c, TokensPerS: float64(tokens) / avg.Seconds(), GFLOPs: c.FLOPs(tokens) / avg.Seconds() / 1e9,
		PeakRSS: peakRSS(), StepMS: float64(avg.Microseconds()) / 1000, Bubble: bub, Idle: idle}
	if p > 1 {
		res.TheoreticalBubble = theoreticalBubble(p, a.Model.NumModelChunks(), m)
	}
	return res, nil
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
