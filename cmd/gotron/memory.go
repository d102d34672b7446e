package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/train"
)

func newInspectMemoryCmd() *cobra.Command {
	a := train.DefaultArgs()
	a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads, a.Model.SeqLength = 4, 512, 8, 512
	a.Model.VocabSize = 256
	a.Model.TensorModelParallelSize = 4
	var model *modelFlags // addModelFlags below
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Measure activation memory per rank for one micro-batch under TP, SP, CP and recompute, beside the formulas",
		Long: `memory runs one micro-batch of the model forward and backward on in-process
ranks, for one rank and for --tensor-model-parallel-size t with and without
sequence parallelism, selective and full recompute (and, with
--context-parallel-size n, for CP n alone, with recompute and with TP t + SP),
and prints rank 0's
activation memory (bytes saved for backward) per layer, measured, beside
gotron's formula and Korthikanti et al. 2022's (Table 2, 16-bit activations),
and the whole model's at the end of forward (beside the formula's) and at its
peak. A MoE model's
layouts hold every expert on each rank, split over the layout's tensor-parallel
ranks, and leave out TP without SP and full recompute (MoE refuses both).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := model.apply(); err != nil {
				return err
			}
			rows, err := train.MeasureActivations(cmd.Context(), a)
			if err != nil {
				return err
			}
			m := a.Model
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "s=%d b=%d h=%d a=%d L=%d V=%d, hidden and attention dropout %g/%g; bytes per rank (rank 0)\n",
				m.SeqLength, a.MicroBatchSize, m.HiddenSize, m.NumAttentionHeads, m.NumLayers, m.VocabSize, m.HiddenDropout, m.AttentionDropout)
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "layout\tper layer\tgotron formula\tKorthikanti (16-bit)\tKorthikanti ×2 (32-bit)\tend of forward\tgotron formula\tpeak\t")
			for _, r := range rows {
				k, k2 := fmt.Sprintf("%.0f", r.Korthikanti), fmt.Sprintf("%.0f", 2*r.Korthikanti)
				if r.Korthikanti == 0 {
					k, k2 = "-", "-" // a MoE model: the paper's layers are dense
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t\n", r.Layout, r.PerLayer, r.Estimate, k, k2, r.EndOfForward, r.EstimateTotal, r.Peak)
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	model = addModelFlags(f, &a.Model)
	f.IntVar(&a.Model.TensorModelParallelSize, "tensor-model-parallel-size", a.Model.TensorModelParallelSize, "tensor-parallel size t of the layouts compared")
	f.IntVar(&a.Model.ContextParallelSize, "context-parallel-size", 1, "also compare context parallelism over this many ranks (alone, with selective and full recompute, and with TP + SP)")
	f.StringSliceVar(&a.Model.CPCommType, "cp-comm-type", nil, "context-parallel attention of those layouts: p2p (default), all_gather, a2a or a2a+p2p")
	f.IntSliceVar(&a.Model.HierarchicalContextParallelSizes, "hierarchical-context-parallel-sizes", nil, "A,P: the all-to-all and ring sizes of a2a+p2p")
	f.IntVar(&a.MicroBatchSize, "micro-batch-size", a.MicroBatchSize, "rows of the micro-batch")
	f.Uint64Var(&a.Seed, "seed", a.Seed, "seed of initialisation, data and dropout")
	return cmd
}
