package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gotron/gotron/plan"
	"github.com/gotron/gotron/train"
)

func newPlanCmd() *cobra.Command {
	a := train.DefaultArgs()
	a.WorldSize = 0
	var model *modelFlags // addModelFlags below
	var hardware, timeline, attention, calibrate string
	var asJSON, flashAttn bool
	var search searchFlags
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Predict the memory and iteration time of a layout on a GPU cluster, from the schedules and memory model that train",
		Long: `plan takes gotron train's model, parallel, batch, precision, recompute,
optimizer and schedule flags, --world-size devices and a hardware description
(--hardware: a100-80gb, the DGX A100 cluster of Korthikanti et al. 2022, or
h100-80gb, or a file of the same fields), and prints one iteration of the run
on them: its time, split into the busiest pipeline rank's kernels, the tensor-,
context- and expert-parallel communication they leave exposed, its pipeline
bubble, the data-parallel communication left exposed, the tied embedding's
all-reduce and the optimizer's step; tokens/s, model TFLOP/s per device and the
fraction of the peak; and each pipeline rank's memory (weights, gradients,
optimizer state and the activations of the schedule's micro-batches in flight)
against the device's. Dense, MoE (EP/ETP, both dispatchers), multi-latent
attention and MTP models; DDP, the distributed optimizer and Megatron-FSDP; every
pipeline schedule gotron trains. A layout that does not fit ends in an error.

Each model chunk's forward, backward and weight-gradient times come from its
FLOPs and bytes on the device (GEMMs, attention, element-wise kernels and each
collective on its group's links); every pipeline rank's real action list, the
one gotron train runs, is played with those times. --json prints the same
numbers for tools; --timeline FILE draws the simulated iteration as
--profile-schedule draws a measured one. docs/PLAN.md describes the model and
its accuracy against published runs.

--search plans every layout of the devices instead (tensor-parallel sizes up to
a node, with sequence parallelism; context-parallel sizes for sequences of
8192 or more; pipeline and virtual-pipeline sizes; expert-parallel sizes of a
MoE model; the pipeline schedules, zero-bubble ones included; micro-batches of
1 to 8; no, selective or full recompute), those gotron could train and that
fit in --memory-limit-gib, ranked by tokens/s, with the reasons the others
were rejected. A layout flag given on the command line
(--tensor-model-parallel-size, --context-parallel-size,
--pipeline-model-parallel-size, --virtual-pipeline-model-parallel-size,
--expert-model-parallel-size, --pipeline-schedule, --micro-batch-size,
--recompute-granularity) pins that choice.

--calibrate FILE measures this machine instead (a device a core: gotron's GEMM
and element-wise kernels, an in-process all-reduce) and writes it as a
description to plan gotron's own runs on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if calibrate != "" {
				var others []string
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if f.Name != "calibrate" {
						others = append(others, "--"+f.Name)
					}
				})
				if len(others) > 0 {
					return fmt.Errorf("--calibrate measures this machine and plans nothing: drop %s, then plan with --hardware %s", strings.Join(others, ", "), calibrate)
				}
				return writeCalibration(cmd, calibrate)
			}
			if err := model.apply(); err != nil {
				return err
			}
			if err := overlapFlags(cmd, &a); err != nil {
				return err
			}
			if err := ddpFlags(cmd, &a); err != nil {
				return err
			}
			if !cmd.Flags().Changed("world-size") {
				return fmt.Errorf("--world-size is missing: give the devices the run would use")
			}
			if a.WorldSize < 1 {
				return fmt.Errorf("--world-size %d: give the devices the run would use (at least 1)", a.WorldSize)
			}
			unfused, err := unfusedAttention(attention, flashAttn)
			if err != nil {
				return err
			}
			hw, err := plan.LoadHardware(hardware)
			if err != nil {
				return err
			}
			if err := search.check(cmd); err != nil {
				return err
			}
			if search.limitGiB > 0 {
				hw.MemoryGiB = search.limitGiB
			}
			if search.on {
				return runSearch(cmd, a, hw, search, asJSON, unfused)
			}
			r, err := train.PlanRun(a, a.WorldSize)
			if err != nil {
				return err
			}
			r.UnfusedAttention = unfused
			p, err := plan.Predict(cmd.Context(), r, a.WorldSize, hw)
			if err != nil {
				return err
			}
			if timeline != "" && p.PP > 1 {
				if err := p.Timeline.WriteSVG(timeline); err != nil {
					return fmt.Errorf("--timeline: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, err := json.MarshalIndent(p, "", "  ")
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
					return err
				}
				if timeline != "" && p.PP < 2 {
					fmt.Fprintf(cmd.ErrOrStderr(), "no timeline drawn: --timeline draws a pipeline, and --pipeline-model-parallel-size is 1\n")
				}
				return notFit(p, hw)
			}
			printPlan(out, r, p, hw)
			if timeline != "" {
				if p.PP < 2 {
					fmt.Fprintf(out, "no timeline drawn: --timeline draws a pipeline, and --pipeline-model-parallel-size is 1\n")
				} else {
					fmt.Fprintf(out, "drew the simulated iteration in %s\n", timeline)
				}
			}
			return notFit(p, hw)
		},
	}
	cmd.SetFlagErrorFunc(planFlagError)
	f := cmd.Flags()
	f.SortFlags = false
	model = addRunFlags(f, &a)
	f.Lookup("world-size").Usage = "devices the run would use"
	f.StringVar(&a.PipelineSchedule, "pipeline-schedule", "", "pipeline schedule: 1f1b (the default; interleaved with --virtual-pipeline-model-parallel-size), zb-h1, zb-h2, zb-v or dualpipev, as gotron train")
	f.Bool("overlap-p2p-communication", false, "overlap pipeline sends and receives with computation (interleaved schedule; the default there)")
	f.Bool("no-overlap-p2p-communication", false, "batch pipeline sends and receives instead of overlapping them")
	f.IntVar(&a.MicroBatchSize, "micro-batch-size", a.MicroBatchSize, "rows per micro-batch on each rank")
	f.IntVar(&a.GlobalBatchSize, "global-batch-size", a.GlobalBatchSize, "rows per iteration over all data-parallel ranks (0: micro-batch-size × data-parallel size)")
	f.StringVar(&a.Optimizer, "optimizer", a.Optimizer, "adam, or sgd (--sgd-momentum)")
	f.Float64Var(&a.SGDMomentum, "sgd-momentum", a.SGDMomentum, "SGD's momentum (0: no momentum buffer)")
	f.StringVar(&hardware, "hardware", "a100-80gb", "the devices and links: "+strings.Join(plan.ShippedHardware(), ", ")+", or a JSON file of the same fields (docs/PLAN.md)")
	f.StringVar(&attention, "attention-backend", "auto", "the attention core: flash, fused or auto (one fused kernel, causal half skipped, no scores kept), or unfused or local (scores through memory and kept for backward, as Megatron's 2022 kernels)")
	f.BoolVar(&flashAttn, "use-flash-attn", false, "flash attention: --attention-backend flash")
	f.BoolVar(&asJSON, "json", false, "print the prediction as JSON")
	f.StringVar(&calibrate, "calibrate", "", "measure this machine (a device a core: GEMM rates, memory bandwidth, in-process all-reduce) and write it as a hardware description to this file, instead of planning")
	f.BoolVar(&search.on, "search", false, "plan every layout of --world-size devices and rank those that fit by tokens/s")
	f.IntVar(&search.top, "search-top", 10, "with --search, print this many of the fastest layouts")
	f.Float64Var(&search.limitGiB, "memory-limit-gib", 0, "the memory a device may use, GiB, for the plan's fit and --search's (0: the device's)")
	f.StringVar(&timeline, "timeline", "", "draw the simulated pipeline iteration, every pipeline rank, as an SVG timeline in this file")
	return cmd
}

// printPlan writes a prediction for people: the run, the iteration's time
// and speed, and each pipeline rank's memory.
func printPlan(out io.Writer, r plan.Run, p *plan.Prediction, hw plan.Hardware) {
	m := r.Model
	prec := "float32"
	switch {
	case m.BF16:
		prec = "bf16"
	case m.FP16:
		prec = "fp16"
	}
	var opts []string
	if m.SequenceParallel && p.TP > 1 {
		opts = append(opts, "sequence parallel")
	}
	if g := m.RecomputeGranularity; g != "" {
		opts = append(opts, g+" recompute")
	}
	if r.DDP.UseDistributedOptimizer && p.DP > 1 {
		opts = append(opts, "distributed optimizer")
	}
	mbs := "micro-batches"
	if p.Microbatches == 1 {
		mbs = "micro-batch"
	}
	fmt.Fprintf(out, "gotron plan: a GPT of %s parameters on %d × %s (%d a node): TP %d × CP %d × PP %d (VPP %d) × DP %d; %d %s of %d per data-parallel rank, %s, %s",
		parameters(plan.ParameterCount(m)), p.World, hw.Name, hw.DevicesPerNode, p.TP, p.CP, p.PP, p.VPP, p.DP, p.Microbatches, mbs, r.MicroBatchSize, p.Schedule, prec)
	if r.UnfusedAttention {
		opts = append(opts, "unfused attention")
	} else {
		opts = append(opts, "flash attention")
	}
	fmt.Fprintf(out, ", %s\n", strings.Join(opts, ", "))
	if hw.Caveat != "" {
		fmt.Fprintf(out, "note: %s: %s\n", hw.Name, hw.Caveat)
	}
	t := p.Time
	fmt.Fprintf(out, "iteration %.4g s: compute %.4g s, exposed TP communication %.3g s, exposed CP communication %.3g s, ", p.IterationSeconds, t.Compute, t.TPComm, t.CPComm)
	if m.NumMoEExperts > 0 {
		fmt.Fprintf(out, "exposed EP communication %.3g s, ", t.EPComm)
	}
	fmt.Fprintf(out, "pipeline bubble %.3g s, exposed DP communication %.3g s, embedding all-reduce %.3g s, optimizer %.3g s\n",
		t.Bubble, t.DPComm, t.EmbeddingSync, t.Optimizer)
	fmt.Fprintf(out, "%s tokens/s, %.3g model TFLOP/s per device, %.3g%% of the %s peak\n", rate(p.TokensPerSecond), p.ModelTFLOPSPerDevice, 100*p.PeakFraction, prec)
	fmt.Fprintf(out, "memory per device, GiB (of %g), by pipeline rank:\n", hw.MemoryGiB)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "rank\tlayers\tweights\tgradients\toptimizer\tactivations\tin flight\ttotal\tfits\tidle\t")
	gib := func(x float64) string { return fmt.Sprintf("%.2f", x/(1<<30)) }
	for _, rk := range p.Ranks {
		fits := "yes"
		if !rk.Fits {
			fits = "NO"
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%.1f%%\t\n", rk.PipelineRank, rk.Layers, gib(rk.Memory.Weights), gib(rk.Memory.Gradients),
			gib(rk.Memory.Optimizer), gib(rk.Memory.Activations), rk.InFlight, gib(rk.MemoryBytes), fits, 100*rk.IdleFraction)
	}
	w.Flush()
}

// rate prints a rate with its significant digits: whole above 100, three
// digits below.
func rate(x float64) string {
	if x >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

// unfusedAttention reads --attention-backend and --use-flash-attn:
// whether the plan's attention keeps its scores in memory.
func unfusedAttention(backend string, flash bool) (bool, error) {
	switch backend {
	case "flash", "fused", "auto":
		return false, nil
	case "unfused", "local":
		if flash {
			return false, fmt.Errorf("--use-flash-attn and --attention-backend %s contradict each other: give one", backend)
		}
		return true, nil
	}
	return false, fmt.Errorf("--attention-backend %q: choose flash, fused, unfused, local or auto", backend)
}

// notFit is the error of a plan some rank of which does not fit in the
// device's memory, naming the worst one and what uses less; nil when all
// fit.
func notFit(p *plan.Prediction, hw plan.Hardware) error {
	var over []int
	for _, r := range p.Ranks {
		if !r.Fits {
			over = append(over, r.PipelineRank)
		}
	}
	if len(over) == 0 {
		return nil
	}
	w := p.Max()
	return fmt.Errorf("the layout does not fit: %d of %d pipeline ranks need more than the device's %g GiB, rank %d %.1f GiB (activations %.1f GiB, optimizer state %.1f GiB); selective or full recompute, a larger --tensor-model-parallel-size or --pipeline-model-parallel-size, or --use-distributed-optimizer use less (gotron plan --search finds a layout that fits)",
		len(over), len(p.Ranks), hw.MemoryGiB, w.PipelineRank, w.MemoryBytes/(1<<30), w.Memory.Activations/(1<<30), w.Memory.Optimizer/(1<<30))
}

// planFlagError explains an unknown flag that gotron train takes: a
// Megatron script's training flags (--lr, --save, --train-iters, …) do
// not change what a layout costs.
func planFlagError(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	if newTrainCmd().Flags().Lookup(name) != nil {
		return fmt.Errorf("--%s is a training flag: gotron plan takes gotron train's model, layout, batch, precision, recompute, optimizer and schedule flags, not those of the training loop, data or checkpoints; drop --%s", name, name)
	}
	return errors.New(unknownFlag(cmd.Flags(), "--"+name)) // train's message: a Megatron flag gotron lacks, or the nearest flag
}

// writeCalibration is gotron plan --calibrate FILE: this machine measured
// as a hardware description (plan.Calibrate), written to FILE and
// printed.
func writeCalibration(cmd *cobra.Command, file string) error {
	name := strings.TrimSuffix(filepath.Base(file), ".json")
	hw, err := plan.Calibrate(cmd.Context(), name)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(hw, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("--calibrate: %w", err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%swrote %s: plan on it with --hardware %s\n", b, file, file)
	return err
}

// parameters writes a parameter count as a reader says it: 175 B, 7.24 B,
// 124 M, 166 k.
func parameters(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.3g B", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.3g M", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.3g k", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
