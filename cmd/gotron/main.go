// Command gotron trains GPT models with Megatron-Core's parallelism on CPUs.
//
//	gotron train --mock-data --num-layers 2 --hidden-size 64 ...
//	gotron inspect groups --world-size 8 --tensor-model-parallel-size 2
//	gotron bench
//
// Flags are spelled as Megatron's. Errors are printed as one line naming
// the flag or file and the fix, and the command exits with status 1. A
// first SIGINT or SIGTERM stops training after the current iteration,
// saving with --save (status 0 with --exit-signal-handler, else
// 128+signal); a second exits at once.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	ctx, in := watchSignals()
	err := newRoot().ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		fmt.Fprintf(os.Stderr, "gotron: %s\n", ee.msg)
		os.Exit(ee.code)
	case in.received() != 0 && ctx.Err() != nil:
		// Every part of the command stopped with the context's error;
		// say what happened instead.
		s := in.received()
		fmt.Fprintf(os.Stderr, "gotron: interrupted by %s: stopped without finishing\n", name(s))
		os.Exit(128 + int(s))
	}
	fmt.Fprintf(os.Stderr, "gotron: %v\n", err)
	os.Exit(1)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "gotron",
		Short:         "Megatron-Core's parallel training of GPT models, in Go, on CPUs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTrainCmd(), newInspectCmd(), newBenchCmd())
	root.AddCommand(newCkptCmd())
	return root
}
