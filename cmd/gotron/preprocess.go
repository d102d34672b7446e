package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gotron/gotron/data/preprocess"
	"github.com/gotron/gotron/data/tokenizer"
)

// newPreprocessCmd is `gotron preprocess`, Megatron's tools/preprocess_data.py.
func newPreprocessCmd() *cobra.Command {
	var o preprocess.Options
	var splitSentences bool
	var vocabSize int
	var tokFlags *tokenizerFlags
	var cpuProfile string
	var partitions int
	cmd := &cobra.Command{
		Use:   "preprocess --input PATH --output-prefix PREFIX --tokenizer-type TYPE [...]",
		Short: "Tokenize JSONL or text into indexed datasets (Megatron's preprocess_data.py)",
		Long: `preprocess tokenizes documents into Megatron's indexed dataset format,
PREFIX_KEY_document.bin and .idx for each --json-keys KEY, which gotron train
--data-path PREFIX_KEY_document (and Megatron) read.

Input: JSON lines (files ending in .jsonl, .json or .ndjson: one object per line,
each key a string or a list of strings), or plain-text files (one document
each, key text), or directories of them (walked in lexical order; narrow them
with --input-extensions). The output appears when every document is written:
an error or Ctrl-C leaves no file behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if splitSentences {
				return fmt.Errorf("--split-sentences: sentence splitting (NLTK's punkt in the reference) is not provided by gotron; GPT datasets are built from whole documents: drop the flag")
			}
			notes, err := preprocessNotes(cmd, partitions)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("vocab-size") && tokFlags.o.Type != tokenizer.TypeNull {
				return fmt.Errorf("--vocab-size sets the %s's number of ids, and --tokenizer-type is %q, which has a vocabulary of its own: drop --vocab-size", tokenizer.TypeNull, tokFlags.o.Type)
			}
			tok, err := tokFlags.build(vocabSize)
			if err != nil {
				return err
			}
			if tok == nil {
				return fmt.Errorf("--tokenizer-type is required: one of %s", strings.Join(tokenizer.Types(), ", "))
			}
			if term.IsTerminal(int(os.Stderr.Fd())) {
				o.Progress = os.Stderr
			}
			o.Tokenizer = tok
			stop, err := startCPUProfile(cpuProfile, "local")
			if err != nil {
				return err
			}
			defer stop()
			if o.Progress == nil && o.LogInterval > 0 {
				o.Log = os.Stderr
			}
			res, err := preprocess.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, n := range notes {
				fmt.Fprintln(out, n)
			}
			fmt.Fprintf(out, "preprocessed %s, %s, %.1f MB with %s into %d tokens in %.2fs: %.2f MB/s, %.0f tokens/s (%s)\n",
				plural(res.Files, "file", "files"), plural(res.Documents, "document", "documents"), float64(res.Bytes)/1e6, tok.Name(), res.Tokens, res.Elapsed.Seconds(), res.MBPerSecond(), res.TokensPerSecond(), plural(o.Workers, "worker", "workers"))
			if res.BadLines+res.Binary > 0 {
				fmt.Fprintf(out, "skipped %d unreadable JSON lines (--skip-bad-lines) and %d binary files\n", res.BadLines, res.Binary)
			}
			for _, p := range res.Outputs {
				fmt.Fprintf(out, "wrote %s.bin and %s.idx: train with --data-path %s\n", p, p, p)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringSliceVar(&o.Inputs, "input", nil, "JSONL or text files, or directories of them (several: comma-separated or space-separated)")
	f.StringSliceVar(&o.JSONKeys, "json-keys", []string{"text"}, "keys to read from each JSON line; one dataset each")
	f.StringVar(&o.OutputPrefix, "output-prefix", "", "write PREFIX_KEY_document.bin and .idx")
	f.StringSliceVar(&o.Extensions, "input-extensions", nil, "in directories, read only files with these extensions (e.g. go,txt)")
	tokFlags = addTokenizerFlags(f)
	f.IntVar(&vocabSize, "vocab-size", 0, "NullTokenizer: the number of ids")
	f.BoolVar(&o.AppendEOD, "append-eod", false, "append the end-of-document token to each document")
	f.BoolVar(&splitSentences, "split-sentences", false, "not provided (refused): documents are kept whole")
	f.IntVar(&o.Workers, "workers", runtime.NumCPU(), "tokenizing goroutines")
	f.IntVar(&partitions, "partitions", 1, "Megatron's input partitions: gotron tokenizes in one pass with --workers goroutines, in input order, and writes what the merged partitions would")
	f.Bool("keep-sequential-samples", false, "Megatron's order-keeping for --partitions: gotron always writes the documents in input order")
	f.Bool("keep-newlines", false, "Megatron's newlines between split sentences: gotron keeps each document whole, newlines included")
	f.BoolVar(&o.SkipBadLines, "skip-bad-lines", false, "skip (and count) JSON lines that cannot be read instead of stopping at the first")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run (go tool pprof) here")
	f.IntVar(&o.LogInterval, "log-interval", 0, "print a progress line every this many documents (when stderr is not a terminal; a terminal shows a progress bar)")
	return cmd
}

// preprocessNotes checks Megatron's partitioning flags and returns a note
// for each given: --partitions, --keep-sequential-samples and
// --keep-newlines change nothing in gotron's output, which is always the
// documents whole and in input order.
func preprocessNotes(cmd *cobra.Command, partitions int) ([]string, error) {
	f := cmd.Flags()
	if partitions < 1 {
		return nil, fmt.Errorf("--partitions %d: must be at least 1", partitions)
	}
	var notes []string
	if f.Changed("partitions") {
		notes = append(notes, fmt.Sprintf("note: --partitions %d: gotron tokenizes the input in one pass with --workers goroutines and writes the documents in input order, the dataset %d merged partitions give", partitions, partitions))
	}
	if f.Changed("keep-sequential-samples") {
		notes = append(notes, "note: --keep-sequential-samples: gotron always writes the documents in input order")
	}
	if f.Changed("keep-newlines") {
		notes = append(notes, "note: --keep-newlines: gotron keeps each document whole, newlines included (it splits no sentences)")
	}
	return notes, nil
}

// plural is "1 file" or "n files".
func plural[T ~int | ~int64](n T, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
