package main

import (
	"github.com/spf13/cobra"

	"github.com/gotron/gotron/mesh"
)

func newInspectCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "inspect", Short: "Show how a job is laid out"}
	cmd.AddCommand(newInspectGroupsCmd(), newInspectMemoryCmd(), newInspectScheduleCmd(), newInspectLayoutCmd(), newInspectBucketsCmd(), newInspectSamplesCmd())
	return cmd
}

func newInspectGroupsCmd() *cobra.Command {
	var s mesh.Sizes
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Print the rank groups Megatron's initialize_model_parallel builds for a world",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := mesh.Build(s)
			if err != nil {
				return err
			}
			if asJSON {
				return l.WriteJSON(cmd.OutOrStdout())
			}
			return l.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&s.World, "world-size", 1, "number of ranks")
	f.IntVar(&s.TP, "tensor-model-parallel-size", 1, "tensor-parallel size")
	f.IntVar(&s.PP, "pipeline-model-parallel-size", 1, "pipeline-parallel size")
	f.IntVar(&s.CP, "context-parallel-size", 1, "context-parallel size")
	f.IntVar(&s.EP, "expert-model-parallel-size", 1, "expert-parallel size")
	f.IntVar(&s.ETP, "expert-tensor-parallel-size", 0, "expert tensor-parallel size (0: the tensor-parallel size)")
	f.IntVar(&s.NumDistOptInstances, "num-distributed-optimizer-instances", 1, "distributed-optimizer instances")
	f.StringVar(&s.Order, "order", mesh.DefaultOrder, "rank order of the parallel dimensions")
	f.BoolVar(&asJSON, "json", false, "print JSON: {\"world_size\", \"order\", \"groups\": {name: [[ranks]...]}}")
	return cmd
}
