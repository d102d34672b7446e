package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/train"
)

func newBenchCmd() *cobra.Command {
	var o train.BenchOptions
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure training throughput: tokens/s, GFLOP/s and peak memory of the small and medium GPTs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			return train.Bench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Configs, "configs", []string{"small", "medium"}, "model configurations to measure (small, medium)")
	f.IntVar(&o.Iters, "iters", 5, "timed iterations per configuration (after one warm-up)")
	f.IntVar(&o.Threads, "threads", 0, "cores to use (0: all), divided among the ranks")
	f.IntVar(&o.TensorParallel, "tensor-model-parallel-size", 1, "run each configuration on this many in-process tensor-parallel ranks")
	f.BoolVar(&o.SequenceParallel, "sequence-parallel", false, "with --tensor-model-parallel-size > 1, add sequence parallelism")
	f.IntVar(&o.PipelineParallel, "pipeline-model-parallel-size", 1, "run each configuration on this many in-process pipeline stages")
	f.IntVar(&o.VirtualPipeline, "virtual-pipeline-model-parallel-size", 0, "model chunks per pipeline stage (interleaved 1F1B; 0: not interleaved)")
	f.IntVar(&o.Microbatches, "num-microbatches", 1, "microbatches per iteration (the global batch is this many micro-batches)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) here")
	return cmd
}
