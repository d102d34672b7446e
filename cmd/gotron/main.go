// Command gotron trains GPT models with Megatron-Core's parallelism on CPUs.
//
//	gotron train --mock-data --num-layers 2 --hidden-size 64 ...
//	gotron inspect groups --world-size 8 --tensor-model-parallel-size 2
//	gotron bench
//
// Flags are spelled as Megatron's. Errors are printed as one line naming
// the flag or file and the fix, and the command exits with status 1.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil {
		if interrupted {
			// Every rank stops with the context's error; say what happened
			// first, and keep the detail of where each rank was.
			fmt.Fprintf(os.Stderr, "gotron: interrupted by a signal; nothing after the last saved checkpoint is kept (stopped at: %v)\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "gotron: %v\n", err)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "gotron",
		Short:         "Megatron-Core's parallel training of GPT models, in Go, on CPUs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTrainCmd(), newInspectCmd(), newBenchCmd())
	return root
}
