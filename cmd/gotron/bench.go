package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gotron/gotron/bench"
	"github.com/gotron/gotron/train"
)

func newBenchCmd() *cobra.Command {
	var o bench.Options
	// a receives the data-parallel flags (addDDPFlags), as for training.
	a := train.DefaultArgs()
	var cpuProfile, backend string
	var gemm bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure training throughput: tokens/s, GFLOP/s and peak memory of the small and medium GPTs",
		Long: `Measure training throughput on mock data: tokens/s, GFLOP/s, peak memory, the
iteration's time and the optimizer step's (the Adam update and, with
--use-distributed-optimizer, the parameter all-gather).

The ranks (tensor × pipeline × data parallel) run as goroutines of this
process, or, with --backend mpi, one per process of an mpirun job:

  mpirun -np 2 bin/gotron-mpi bench --backend mpi --configs medium --overlap-grad-reduce`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if gemm {
				if err := gemmOnlyFlags(cmd); err != nil {
					return err
				}
				o.BF16 = a.Model.BF16
				return bench.Gemm(cmd.Context(), cmd.OutOrStdout(), o)
			}
			if err := ddpFlags(cmd, &a); err != nil {
				return err
			}
			if cmd.Flags().Changed("data-parallel-size") && o.DataParallel < 1 {
				return fmt.Errorf("--data-parallel-size %d: must be at least 1", o.DataParallel)
			}
			o.DDP, o.AlignParamGather, o.BF16, o.FP16, o.Precision = &a.DDP, a.AlignParamGather, a.Model.BF16, a.Model.FP16, &a.Precision
			if backend != "local" && backend != "mpi" {
				return fmt.Errorf("--backend %q: choose local (ranks as goroutines) or mpi (one process per rank under mpirun)", backend)
			}
			if cpuProfile != "" && o.Breakdown {
				return fmt.Errorf("--cpuprofile and --breakdown both profile the run: give one")
			}
			stop, err := startCPUProfile(cpuProfile, backend)
			if err != nil {
				return err
			}
			defer stop()
			if backend == "mpi" {
				return benchMPI(cmd.Context(), cmd.OutOrStdout(), o)
			}
			return bench.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringSliceVar(&o.Configs, "configs", []string{"small", "medium"}, "model configurations to measure (small, medium, medium-llama, medium-moe, long)")
	f.IntVar(&o.Iters, "iters", 5, "timed iterations per configuration (after one warm-up); the optimizer step is timed as many times after them")
	f.IntVar(&o.Threads, "threads", 0, "cores to use (0: all), divided among the ranks")
	f.StringVar(&backend, "backend", "local", "local: the ranks as goroutines of this process; mpi: this process is one rank of an mpirun job")
	f.IntVar(&o.TensorParallel, "tensor-model-parallel-size", 1, "run each configuration on this many tensor-parallel ranks")
	f.BoolVar(&o.SequenceParallel, "sequence-parallel", false, "with --tensor-model-parallel-size > 1, add sequence parallelism")
	f.IntVar(&o.PipelineParallel, "pipeline-model-parallel-size", 1, "run each configuration on this many pipeline stages")
	f.StringVar(&o.PipelineSchedule, "pipeline-schedule", "", "pipeline schedule: 1f1b (the default), zb-h1, zb-h2, zb-v or dualpipev (zero-bubble: each backward split, its weight gradients deferred into the bubble; zb-h2 with 2P-1 microbatches in flight; zb-v and dualpipev with --virtual-pipeline-model-parallel-size 2, two chunks per rank in a V)")
	f.BoolVar(&o.DeferEmbeddingWgrad, "defer-embedding-wgrad-compute", false, "defer the last stage's output-layer weight gradients to the pipeline flush")
	f.IntVar(&o.WgradDeferralLimit, "wgrad-deferral-limit", 0, "with --defer-embedding-wgrad-compute, defer the last this many microbatches (0: all)")
	f.IntVar(&o.VirtualPipeline, "virtual-pipeline-model-parallel-size", 0, "model chunks per pipeline stage (interleaved 1F1B; 0: not interleaved)")
	f.StringVar(&o.PipelineLayout, "pipeline-model-parallel-layout", "", `the stages' layers as a layout string (E embedding, t decoder layer, L loss, | between stages; e.g. "Et|tt|tt|tL" for the medium model's 6 layers on 2 ranks × 2 chunks), instead of the even split`)
	f.IntVar(&o.ContextParallel, "context-parallel-size", 1, "split every sequence over this many context-parallel ranks (the long configuration: one 4096-token sequence)")
	f.StringVar(&o.CPCommType, "cp-comm-type", "", "context-parallel attention: p2p (default), all_gather, a2a or a2a+p2p")
	f.IntVar(&o.ExpertParallel, "expert-model-parallel-size", 1, "spread the experts of a MoE configuration (medium-moe) over this many of the ranks")
	f.StringVar(&o.Dispatcher, "moe-token-dispatcher-type", "", "MoE token dispatcher: allgather (default) or alltoall")
	f.IntSliceVar(&o.Hierarchical, "hierarchical-context-parallel-sizes", nil, "A,P: the all-to-all and ring sizes of a2a+p2p")
	f.IntVar(&o.DataParallel, "data-parallel-size", 0, "data-parallel replicas (default 1; with --backend mpi the processes / (tensor × pipeline parallel size), which this must match if given)")
	f.IntVar(&o.Microbatches, "num-microbatches", 1, "microbatches per iteration of each data-parallel replica (the global batch is this many micro-batches × the data-parallel size)")
	addDDPFlags(f, &a)
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) here (with --backend mpi, one per process: FILE.rankN)")
	f.BoolVar(&gemm, "gemm", false, "instead of training, measure every GEMM kernel this machine has (OpenBLAS, oneDNN float32; with --bf16 oneDNN bf16 and bf16 widened to float32) at each GEMM shape of the configurations, mark gotron's pick, and print the GEMM ceiling (the tokens/s if every GEMM ran at the best measured rate for its shape)")
	f.BoolVar(&o.Breakdown, "breakdown", false, "profile the timed iterations and print where the CPU time goes (GEMM, attention, other kernels, optimizer, communication, allocation, runtime) and, with one rank per process, each GEMM shape's wall time and rate inside the step")
	return cmd
}

// gemmFlags are the flags bench --gemm reads; it measures kernels, not a
// training layout.
var gemmFlags = map[string]bool{"gemm": true, "configs": true, "bf16": true, "threads": true}

// gemmOnlyFlags refuses, for bench --gemm, every flag it would ignore.
func gemmOnlyFlags(cmd *cobra.Command) error {
	var extra []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !gemmFlags[f.Name] {
			extra = append(extra, "--"+f.Name)
		}
	})
	if len(extra) > 0 {
		return fmt.Errorf("--gemm measures the GEMM kernels of one rank in this process and takes only --configs, --bf16 and --threads: drop %s", strings.Join(extra, ", "))
	}
	return nil
}
