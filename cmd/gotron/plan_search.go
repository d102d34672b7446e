package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/plan"
	"github.com/gotron/gotron/pp"
	"github.com/gotron/gotron/train"
)

// searchFlags are gotron plan's --search settings.
type searchFlags struct {
	on       bool
	top      int
	limitGiB float64
}

// pinnedLayout are the layout flags a --search keeps as given: each
// flag and what it pins of a layout.
var pinnedLayout = []struct {
	flag string
	get  func(plan.Layout) int
	want func(train.Args) int
}{
	{"tensor-model-parallel-size", func(l plan.Layout) int { return l.TP }, func(a train.Args) int { return a.Model.TensorModelParallelSize }},
	{"context-parallel-size", func(l plan.Layout) int { return l.CP }, func(a train.Args) int { return a.Model.ContextParallelSize }},
	{"pipeline-model-parallel-size", func(l plan.Layout) int { return l.PP }, func(a train.Args) int { return a.Model.PipelineModelParallelSize }},
	{"virtual-pipeline-model-parallel-size", func(l plan.Layout) int { return l.VPP }, func(a train.Args) int { return a.Model.VirtualPipelineModelParallelSize }},
	{"expert-model-parallel-size", func(l plan.Layout) int { return l.EP }, func(a train.Args) int { return a.Model.ExpertModelParallelSize }},
	{"micro-batch-size", func(l plan.Layout) int { return l.MicroBatch }, func(a train.Args) int { return a.MicroBatchSize }},
}

// check refuses --search-top without --search, and values that cannot
// be: fewer than one layout, a memory limit below 0 or not finite.
func (s searchFlags) check(cmd *cobra.Command) error {
	switch {
	case cmd.Flags().Changed("search-top") && !s.on:
		return fmt.Errorf("--search-top %d without --search: it says how many of the searched layouts to print; add --search or drop it", s.top)
	case s.top < 1:
		return fmt.Errorf("--search-top %d: print at least 1 layout", s.top)
	case !(s.limitGiB >= 0) || math.IsInf(s.limitGiB, 0):
		return fmt.Errorf("--memory-limit-gib %g: give the memory a device may use, a number ≥ 0 (0: the device's)", s.limitGiB)
	}
	return nil
}

// runSearch is gotron plan --search: every layout of the world planned,
// those that fit ranked.
func runSearch(cmd *cobra.Command, a train.Args, hw plan.Hardware, s searchFlags, asJSON, unfused bool) error {
	f := cmd.Flags()
	for _, fl := range []string{"pipeline-model-parallel-layout", "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers", "num-layers-per-virtual-pipeline-stage", "timeline"} {
		if f.Changed(fl) {
			return fmt.Errorf("--%s with --search: the search chooses the pipeline sizes and places layers evenly; drop --%s, or plan that layout without --search", fl, fl)
		}
	}
	limit := hw.MemoryGiB * (1 << 30) // --memory-limit-gib's, when given
	world := a.WorldSize
	gb := a.GlobalBatchSize
	if gb == 0 {
		return fmt.Errorf("--search needs --global-batch-size: the micro-batches each layout runs depend on it")
	}
	var layouts []plan.Layout
	for _, l := range plan.Layouts(a.Model, world, gb, hw) {
		if keep(cmd, a, l) {
			layouts = append(layouts, l)
		}
	}
	if len(layouts) == 0 {
		return noLayouts(cmd, a, world)
	}
	pinned := f.Changed("recompute-granularity") || f.Changed("recompute-activations")
	tried, err := plan.Search(cmd.Context(), layouts, world, hw, limit, func(l plan.Layout) (plan.Run, error) {
		r, err := train.PlanRun(withLayout(a, l, pinned), world)
		r.UnfusedAttention = unfused
		return r, err
	})
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(struct {
			Layouts int          `json:"layouts"`
			Tried   []plan.Tried `json:"tried"`
		}{len(tried), tried}, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b); err != nil {
			return err
		}
		return noneFits(tried, world, limit)
	}
	printSearch(cmd.OutOrStdout(), tried, world, hw, limit, s.top)
	return noneFits(tried, world, limit)
}

// noneFits is the error of a search no layout of which fits, as a plan
// that does not fit ends in one: the reasons were printed.
func noneFits(tried []plan.Tried, world int, limit float64) error {
	if len(tried) > 0 && tried[0].Prediction != nil {
		return nil
	}
	return fmt.Errorf("--search: none of the %d layouts of %d devices can run in %.1f GiB a device; the reasons are above (a larger --world-size or --memory-limit-gib, or another --global-batch-size, gives others)", len(tried), world, limit/(1<<30))
}

// noLayouts is the error of a search whose pinned layout flags leave it
// nothing to try: the run as given (with sequence parallelism wherever
// TP > 1, as every layout has it) is checked, so a value gotron cannot
// train is named with its fix; else the flags pinned are listed.
func noLayouts(cmd *cobra.Command, a train.Args, world int) error {
	a.Model.SequenceParallel = a.Model.TensorModelParallelSize > 1
	if _, err := train.PlanRun(a, world); err != nil {
		return err
	}
	var pinned []string
	for _, p := range pinnedLayout {
		if cmd.Flags().Changed(p.flag) {
			pinned = append(pinned, fmt.Sprintf("--%s %d", p.flag, p.want(a)))
		}
	}
	if cmd.Flags().Changed("pipeline-schedule") {
		pinned = append(pinned, "--pipeline-schedule "+a.PipelineSchedule)
	}
	return fmt.Errorf("--search: the layout flags given (%s) leave no layout of %d devices to try (docs/PLAN.md, § Searching every layout, lists what the search tries): drop one, or plan that layout without --search",
		strings.Join(pinned, ", "), world)
}

// keep says whether a layout agrees with the layout flags given.
func keep(cmd *cobra.Command, a train.Args, l plan.Layout) bool {
	f := cmd.Flags()
	for _, p := range pinnedLayout {
		if f.Changed(p.flag) && p.get(l) != p.want(a) {
			return false
		}
	}
	if f.Changed("pipeline-schedule") && l.Schedule != strings.TrimPrefix(a.PipelineSchedule, pp.ScheduleOneFOneB) {
		return false
	}
	if f.Changed("recompute-granularity") || f.Changed("recompute-activations") {
		return l.Recompute == a.Model.RecomputeGranularity
	}
	return true
}

// withLayout is a laid out as l (train.Args.WithLayout); when the
// recompute flags are pinned, the method and layers given stay (Apply's
// uniform, a layer at a time, when not given).
func withLayout(a train.Args, l plan.Layout, pinned bool) train.Args {
	rc := a.Model.Recompute
	a = a.WithLayout(l)
	if pinned && rc.RecomputeMethod != "" {
		a.Model.RecomputeMethod = rc.RecomputeMethod
	}
	if pinned && rc.RecomputeNumLayers != 0 {
		a.Model.RecomputeNumLayers = rc.RecomputeNumLayers
	}
	if pinned {
		a.Model.DistributeSavedActivations = rc.DistributeSavedActivations
	}
	return a
}

// printSearch writes the fastest layouts and, by kind, the reasons the
// others were rejected.
func printSearch(out io.Writer, tried []plan.Tried, world int, hw plan.Hardware, limit float64, top int) {
	fit := 0
	for _, t := range tried {
		if t.Prediction != nil {
			fit++
		}
	}
	fmt.Fprintf(out, "gotron plan --search: %d layouts of %d × %s, %d fit in %.1f GiB a device\n", len(tried), world, hw.Name, fit, limit/(1<<30))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "#\tlayout\tDP\titeration s\ttokens/s\tmodel TFLOP/s a device\tof peak\tmemory GiB\tbubble s")
	for i, t := range tried[:min(top, fit)] {
		p := t.Prediction
		fmt.Fprintf(w, "%d\t%s\t%d\t%.4g\t%.0f\t%.1f\t%.1f%%\t%.1f\t%.3g\n", i+1, t.Name, p.DP, p.IterationSeconds, p.TokensPerSecond,
			p.ModelTFLOPSPerDevice, 100*p.PeakFraction, p.Max().MemoryBytes/(1<<30), p.Time.Bubble)
	}
	w.Flush()
	if fit == len(tried) {
		return
	}
	fmt.Fprintf(out, "rejected %d, by reason, the most common first (one example each):\n", len(tried)-fit)
	digits := regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	type group struct {
		n       int
		example plan.Tried
	}
	var order []string
	groups := map[string]*group{}
	for _, t := range tried[fit:] {
		reason := strings.TrimPrefix(t.Rejected, "invalid arguments: ")
		if first, _, ok := strings.Cut(reason, "\n  - "); ok {
			reason = strings.TrimSpace(strings.TrimPrefix(reason[len(first):], "\n  - "))
			reason, _, _ = strings.Cut(reason, "\n")
		}
		t.Rejected = reason
		key := digits.ReplaceAllString(reason, "N")
		if groups[key] == nil {
			groups[key] = &group{example: t}
			order = append(order, key)
		}
		groups[key].n++
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(groups[b].n, groups[a].n) })
	for _, k := range order {
		g := groups[k]
		fmt.Fprintf(out, "  %5d  e.g. %s: %s\n", g.n, g.example.Name, g.example.Rejected)
	}
}
