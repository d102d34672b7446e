package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/data/source"
	"github.com/gotron/gotron/train"
)

// newInspectSamplesCmd is `gotron inspect samples`: the first training
// samples of a run on indexed data, in the order training consumes them.
func newInspectSamplesCmd() *cobra.Command {
	a := train.DefaultArgs()
	var count int
	var asJSON bool
	var tokFlags *tokenizerFlags
	cmd := &cobra.Command{
		Use:   "samples --data-path PREFIX --seq-length N [--split 969,30,1 --seed S --count N --json]",
		Short: "Print the first training samples of indexed data in training order",
		Long: `samples builds the training split of --data-path (or --train-data-path) as
gotron train does (Megatron's GPTDataset: documents shuffled per epoch, samples
of seq-length + 1 tokens spanning documents, the samples shuffled, blends
interleaved by weight) and prints the token ids of the first --count samples in
the order training consumes them, with their text when --tokenizer-type is
given. --json prints exactly {"samples":[[id,...],...]}.

The order of a run's first samples does not depend on its length while they
come from its first pass over the data; pass the run's --train-iters and
--global-batch-size (or --train-samples) to build exactly its datasets. The
sample indices are cached (or reused) as training caches them, under
--data-cache-path or PREFIX/cache/GPTDataset_indices.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.Tokenizer, _ = tokFlags.options()
			samples, tok, err := train.TrainingSamples(a, count)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(struct {
					Samples [][]int32 `json:"samples"`
				}{samples})
			}
			for i, s := range samples {
				ids := make([]string, len(s))
				for j, id := range s {
					ids[j] = strconv.Itoa(int(id))
				}
				fmt.Fprintf(out, "sample %d: %s\n", i, strings.Join(ids, " "))
				if tok != nil {
					fmt.Fprintf(out, "  text: %q\n", tok.Decode(s))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringSliceVar(&a.DataPath, "data-path", nil, "indexed datasets: one prefix, or a blend W1 P1 W2 P2 ...")
	f.StringVar(&a.Split, "split", "", "train,valid,test proportions of the --data-path documents (default "+source.DefaultSplit+")")
	f.StringSliceVar(&a.TrainDataPath, "train-data-path", nil, "the training blend, instead of splitting --data-path")
	f.StringVar(&a.DataCachePath, "data-cache-path", "", "directory of the cached sample indices (default: beside the first dataset)")
	f.IntVar(&a.Model.SeqLength, "seq-length", 0, "tokens per sample (each sample holds seq-length + 1)")
	f.Uint64Var(&a.Seed, "seed", a.Seed, "the run's --seed")
	f.IntVar(&count, "count", 10, "samples to print")
	f.IntVar(&a.TrainIters, "train-iters", 0, "the run's --train-iters (with --global-batch-size)")
	f.IntVar(&a.TrainSamples, "train-samples", 0, "the run's --train-samples")
	f.IntVar(&a.GlobalBatchSize, "global-batch-size", 0, "the run's --global-batch-size")
	tokFlags = addTokenizerFlags(f)
	f.IntVar(&a.Model.VocabSize, "vocab-size", 0, "NullTokenizer: the number of ids")
	f.BoolVar(&asJSON, "json", false, `print {"samples":[[id,...],...]}`)
	return cmd
}
