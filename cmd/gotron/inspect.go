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
	var pf pipelineFlags
	var asJSON, untie bool
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Print the rank groups Megatron's initialize_model_parallel builds for a world",
		Long: `groups prints the rank groups of a world: tensor, pipeline, context, data,
expert and their combinations, as Megatron's initialize_model_parallel builds
them and gotron's ranks join them. The pipeline flags place the word-embedding
group (embd): the first and last pipeline rank, rank 0 alone under the V of
--pipeline-schedule zb-v or dualpipev, and with multi-token prediction
(--mtp-num-layers, or the m of a --pipeline-model-parallel-layout) every rank
holding the embedding or a copy of it, as gotron train builds it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := pf.config(cmd)
			if err != nil {
				return err
			}
			s.PP, s.Placement = c.PipelineModelParallelSize, c.PipelinePlacement
			if c.MTPNumLayers > 0 {
				c.ShareEmbeddingsAndOutputWeights = !untie
				if _, err := c.PipelineChunks(); err != nil {
					return err
				}
				s.EmbeddingStages = c.WordEmbeddingStages()
			}
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
	f.SortFlags = false
	f.IntVar(&s.World, "world-size", 1, "number of ranks")
	f.IntVar(&s.TP, "tensor-model-parallel-size", 1, "tensor-parallel size")
	f.IntVar(&s.CP, "context-parallel-size", 1, "context-parallel size")
	f.IntVar(&s.EP, "expert-model-parallel-size", 1, "expert-parallel size")
	f.IntVar(&s.ETP, "expert-tensor-parallel-size", 0, "expert tensor-parallel size (0: the tensor-parallel size)")
	f.IntVar(&s.NumDistOptInstances, "num-distributed-optimizer-instances", 1, "distributed-optimizer instances")
	f.StringVar(&s.Order, "order", mesh.DefaultOrder, "rank order of the parallel dimensions")
	pf.add(f)
	f.BoolVar(&untie, "untie-embeddings-and-output-weights", false, "with MTP: the output layer is not the word embedding, so the last stage holds no copy of it")
	f.BoolVar(&asJSON, "json", false, "print JSON: {\"world_size\", \"order\", \"groups\": {name: [[ranks]...]}}")
	return cmd
}
