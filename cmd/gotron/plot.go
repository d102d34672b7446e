package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// newPlotCmd is `gotron plot`: pictures of a run's --log-json log.
func newPlotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "plot", Short: "Draw pictures of a training run from its --log-json log"}
	cmd.AddCommand(newPlotExpertLoadCmd(), newPlotLossCmd())
	return cmd
}

// newPlotExpertLoadCmd is `gotron plot expert-load --log-json FILE [--out
// SVG]`.
func newPlotExpertLoadCmd() *cobra.Command {
	var logPath, out string
	cmd := &cobra.Command{
		Use:   "expert-load --log-json FILE [--out expert-load.svg]",
		Short: "Draw each MoE layer's expert load over training as heat maps (SVG)",
		Long: `expert-load reads the --log-json log of a MoE model's training run (gotron
train --num-experts N ... --log-json FILE) and draws, per MoE layer, a heat map
of each expert's share of the tokens the router sent to the layer's experts:
one row per expert, one column per iteration (or per run of consecutive
iterations, their tokens added, when there are more than 200), coloured from
blue (no tokens) through white (the balanced share 1/E) to red (the largest
share of the run). It prints one line: each layer's most and least loaded
expert over the whole run, as shares of the layer's routed tokens.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if logPath == "" {
				return fmt.Errorf("--log-json: give the log of a MoE model's run (gotron train --num-experts N --log-json FILE)")
			}
			f, err := os.Open(logPath)
			if err != nil {
				return fmt.Errorf("--log-json: %w", err)
			}
			defer f.Close()
			l, err := readExpertLoad(f, logPath)
			if err != nil {
				return err
			}
			if err := writeSVGFile(out, func(w io.Writer) error { return l.svg(w, logPath) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s; written to %s\n", l.summary(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&logPath, "log-json", "", "the JSON-lines log a MoE model's gotron train --log-json wrote")
	f.StringVar(&out, "out", "expert-load.svg", "the SVG file to write")
	return cmd
}
