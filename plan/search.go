package plan

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/gotron/gotron/config"
)

// Layout is one way Search places a run on its devices: the parallel
// sizes (the data-parallel size is what the world leaves), the
// micro-batch, the activation recompute and the pipeline schedule.
type Layout struct {
	TP, CP, PP, VPP, MicroBatch int
	// EP is the expert-parallel size (1 for a dense model).
	EP int
	// Recompute is "", "selective" or "full" (uniform, a layer at a time).
	Recompute string
	// Schedule is the pipeline schedule (--pipeline-schedule): "" for
	// 1F1B, interleaved with VPP, or "zb-h1", "zb-h2", "zb-v",
	// "dualpipev".
	Schedule string
}

func (l Layout) String() string {
	s := fmt.Sprintf("TP %d", l.TP)
	if l.TP > 1 {
		s += "+SP"
	}
	if l.CP > 1 {
		s += fmt.Sprintf(" × CP %d", l.CP)
	}
	s += fmt.Sprintf(" × PP %d", l.PP)
	if l.VPP > 1 {
		s += fmt.Sprintf(" (VPP %d)", l.VPP)
	}
	if l.Schedule != "" {
		s += " " + l.Schedule
	}
	if l.EP > 1 { // within the data-parallel ranks' devices, not a factor of the world
		s += fmt.Sprintf(", EP %d", l.EP)
	}
	s += fmt.Sprintf(", micro-batch %d", l.MicroBatch)
	if l.Recompute != "" {
		s += ", " + l.Recompute + " recompute"
	}
	return s
}

// Apply returns cfg laid out as l: its parallel sizes, sequence
// parallelism wherever TP > 1, layers placed evenly, and l's recompute
// (full: uniform, a layer at a time). The micro-batch and the schedule
// are the run's, not the model's (train.Args.WithLayout sets all).
func (l Layout) Apply(cfg config.TransformerConfig) config.TransformerConfig {
	cfg.TensorModelParallelSize, cfg.ContextParallelSize, cfg.PipelineModelParallelSize = l.TP, l.CP, l.PP
	cfg.VirtualPipelineModelParallelSize, cfg.NumLayersPerVirtualPipelineStage = l.VPP, 0
	cfg.PipelineModelParallelLayout, cfg.NumLayersInFirstPipelineStage, cfg.NumLayersInLastPipelineStage = "", 0, 0
	cfg.SequenceParallel = l.TP > 1
	if l.EP > 0 {
		cfg.ExpertModelParallelSize = l.EP
	}
	cfg.Recompute = config.Recompute{RecomputeGranularity: l.Recompute}
	if l.Recompute == "full" {
		cfg.RecomputeMethod, cfg.RecomputeNumLayers = "uniform", 1
	}
	return cfg
}

// Layouts returns the layouts of world devices Search tries for cfg and a
// global batch: every tensor-parallel size t dividing the world up to a
// node's devices (with sequence parallelism above 1); context-parallel
// sizes 2, 4 and 8 besides 1 for sequences of 8192 tokens or more; every
// pipeline size dividing what is left, up to the layers, each with the
// virtual sizes 2 to 8 that divide its layers evenly; for a MoE model,
// every expert-parallel size dividing the experts and the devices of a
// pipeline stage over the expert tensor-parallel size; each pipeline's
// schedules (1F1B with ZB-H1 and ZB-H2; interleaved with ZB-V and
// DualPipeV at two virtual stages); micro-batches of 1, 2, 4 and 8 rows
// that divide a data-parallel rank's share of the batch (1 where none
// does, for the run's validation to refuse); no, selective and full
// recompute. Which of them gotron can train is for the caller's
// build to say.
func Layouts(cfg config.TransformerConfig, world, globalBatch int, hw Hardware) []Layout {
	var out []Layout
	cps := []int{1}
	if cfg.SeqLength >= 8192 {
		cps = append(cps, 2, 4, 8)
	}
	for _, t := range divisorsOf(world) {
		if t > hw.DevicesPerNode {
			break
		}
		for _, c := range cps {
			if (world/t)%c != 0 {
				continue
			}
			for _, p := range divisorsOf(world / t / c) {
				if p > cfg.NumLayers {
					break
				}
				dp := world / t / c / p
				mbs := microBatches(globalBatch, dp)
				for _, l := range pipelines(cfg, world, t, c, p) {
					for _, mb := range mbs {
						for _, rc := range []string{"", "selective", "full"} {
							l.MicroBatch, l.Recompute = mb, rc
							out = append(out, l)
						}
					}
				}
			}
		}
	}
	return out
}

// microBatches is the micro-batch sizes of 1, 2, 4 and 8 rows that divide
// a data-parallel rank's share of the global batch (dp ranks); where none
// does, 1, so that the layout is tried and refused naming the batch.
func microBatches(globalBatch, dp int) []int {
	var out []int
	for _, mb := range []int{1, 2, 4, 8} {
		if globalBatch%(mb*dp) == 0 {
			out = append(out, mb)
		}
	}
	if len(out) == 0 {
		out = []int{1}
	}
	return out
}

// pipelines is the layouts of Layouts at t, c and p before the micro-batch
// and the recompute: each expert-parallel size with each virtual size and
// its schedules.
func pipelines(cfg config.TransformerConfig, world, t, c, p int) []Layout {
	var out []Layout
	for _, e := range expertSizes(cfg, world/p, t) {
		for _, v := range virtualSizes(cfg.NumLayers, p) {
			for _, sched := range schedulesFor(p, v) {
				out = append(out, Layout{TP: t, CP: c, PP: p, VPP: v, EP: e, Schedule: sched})
			}
		}
	}
	return out
}

// expertSizes is 1 for a dense model, and for a MoE model every
// expert-parallel size e that divides its experts and for which e times
// the expert tensor-parallel size (cfg's, else the tensor-parallel size t)
// divides a pipeline stage's devices; where none does, cfg's own, which
// validation then refuses naming why.
func expertSizes(cfg config.TransformerConfig, stage, t int) []int {
	if cfg.NumMoEExperts == 0 {
		return []int{1}
	}
	etp := cfg.ExpertTensorParallelSize
	if etp == 0 {
		etp = t
	}
	var out []int
	for _, e := range divisorsOf(cfg.NumMoEExperts) {
		if stage%(etp*e) == 0 {
			out = append(out, e)
		}
	}
	if len(out) == 0 { // no size fits: the run's own, for validation to refuse with its reason
		out = append(out, max(cfg.ExpertModelParallelSize, 1))
	}
	return out
}

// schedulesFor is the pipeline schedules of p stages of v virtual stages
// each: none to choose at p = 1; 1F1B, ZB-H1 and ZB-H2 without virtual
// stages; interleaved 1F1B, ZB-V and DualPipeV (chunks in a V) at two;
// interleaved 1F1B at more.
func schedulesFor(p, v int) []string {
	switch {
	case p == 1:
		return []string{""}
	case v == 0:
		return []string{"", "zb-h1", "zb-h2"}
	case v == 2:
		return []string{"", "zb-v", "dualpipev"}
	}
	return []string{""}
}

// virtualSizes is 0 (not interleaved) and, with p > 1 stages, every
// virtual size from 2 to 8 that divides the layers evenly.
func virtualSizes(layers, p int) []int {
	out := []int{0}
	if p < 2 {
		return out
	}
	for v := 2; v <= 8; v++ {
		if layers%(p*v) == 0 {
			out = append(out, v)
		}
	}
	return out
}

// divisorsOf is n's divisors, ascending.
func divisorsOf(n int) []int {
	var out []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

// Tried is a layout Search tried: its prediction when it fits, else why
// it was rejected.
type Tried struct {
	Layout     Layout      `json:"-"`
	Name       string      `json:"layout"`
	Prediction *Prediction `json:"prediction,omitempty"`
	Rejected   string      `json:"rejected,omitempty"`
}

// Search plans each layout on world devices of hw, with limit bytes of
// memory a device: build turns a layout into the checked run (or says why
// gotron could not train it); a run whose weights, gradients and optimizer
// state alone exceed the limit is rejected before its pipeline is played,
// and one whose predicted peak does after. It returns the layouts that
// fit, fastest (tokens/s) first, then the rejected ones in the order
// given. The layouts are planned on every core at once.
//
// Once ctx is done the layouts not yet planned are rejected with its
// error, and Search returns it.
func Search(ctx context.Context, layouts []Layout, world int, hw Hardware, limit float64, build func(Layout) (Run, error)) ([]Tried, error) {
	out := make([]Tried, len(layouts))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				out[i] = try(ctx, layouts[i], world, hw, limit, build)
			}
		})
	}
	for i := range layouts {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Tried) int {
		switch {
		case a.Prediction != nil && b.Prediction != nil:
			return cmp.Compare(b.Prediction.TokensPerSecond, a.Prediction.TokensPerSecond)
		case a.Prediction != nil:
			return -1
		case b.Prediction != nil:
			return 1
		}
		return 0
	})
	return out, nil
}

// try plans one layout of Search.
func try(ctx context.Context, l Layout, world int, hw Hardware, limit float64, build func(Layout) (Run, error)) Tried {
	t := Tried{Layout: l, Name: l.String()}
	if err := ctx.Err(); err != nil {
		t.Rejected = err.Error()
		return t
	}
	r, err := build(l)
	if err != nil {
		t.Rejected = err.Error()
		return t
	}
	if need, rank, err := stateBytes(r, world); err != nil {
		t.Rejected = err.Error()
		return t
	} else if need > limit {
		t.Rejected = fmt.Sprintf("weights, gradients and optimizer state alone need %.1f GiB on pipeline rank %d, beyond %.1f GiB", need/(1<<30), rank, limit/(1<<30))
		return t
	}
	p, err := Predict(ctx, r, world, hw)
	if err != nil {
		t.Rejected = firstLine(err.Error())
		return t
	}
	if worst := p.Max(); worst.MemoryBytes > limit {
		t.Rejected = fmt.Sprintf("needs %.1f GiB on pipeline rank %d (activations %.1f GiB), beyond %.1f GiB", worst.MemoryBytes/(1<<30), worst.PipelineRank, worst.Memory.Activations/(1<<30), limit/(1<<30))
		return t
	}
	t.Prediction = p
	return t
}

// stateBytes is the most weights, gradients and optimizer state a device
// of the run holds, and its pipeline rank: Predict's rule without the
// activations, which need the schedule played.
func stateBytes(a Run, world int) (float64, int, error) {
	chunks, err := a.Model.PipelineChunks()
	if err != nil {
		return 0, 0, err
	}
	st := machineShare(a, world, 1)
	most, rank := 0.0, 0
	for r, row := range chunks {
		var n params
		for _, ch := range row {
			n = n.plus(chunkParameters(a.Model, ch))
		}
		if w, g, o := rankState(a, st, n); w+g+o > most {
			most, rank = w+g+o, r
		}
	}
	return most, rank, nil
}

// firstLine is an error's first line.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
