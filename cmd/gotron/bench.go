package main

import (
	"github.com/spf13/cobra"

	"github.com/gotron/gotron/train"
)

func newBenchCmd() *cobra.Command {
	var o train.BenchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure training throughput: tokens/s, GFLOP/s and peak memory of the small and medium GPTs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return train.Bench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Configs, "configs", []string{"small", "medium"}, "model configurations to measure (small, medium)")
	f.IntVar(&o.Iters, "iters", 5, "timed iterations per configuration (after one warm-up)")
	f.IntVar(&o.Threads, "threads", 0, "cores to use (0: all)")
	return cmd
}
