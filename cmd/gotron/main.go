// Command gotron trains GPT models with Megatron-Core's parallelism on CPUs.
//
//	gotron train --mock-data --num-layers 2 --hidden-size 64 ...
//	gotron inspect groups --world-size 8 --tensor-model-parallel-size 2
//	gotron bench
//	gotron plot expert-load --log-json log.jsonl --out load.svg
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
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/gotron/gotron/tensor/blas"
	"github.com/spf13/cobra"
)

func main() {
	// OpenBLAS is loaded first, before the signal watcher and the ranks
	// start threads: loading sets OPENBLAS_CORETYPE (package blas).
	blas.Load()
	ctx, in := watchSignals()
	root := newRoot()
	args, err := commandArgs(root, os.Args[1:])
	if err == nil {
		root.SetArgs(args)
		err = root.ExecuteContext(ctx)
	}
	if err == nil {
		return
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		if ee.msg != "" { // an empty message was said elsewhere (another rank)
			fmt.Fprintf(os.Stderr, "gotron: %s\n", ee.msg)
		}
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
		Version:       version(),
	}
	root.SetVersionTemplate("gotron {{.Version}}\n")
	root.AddCommand(newTrainCmd(), newInspectCmd(), newBenchCmd(), newPlanCmd())
	root.AddCommand(newCkptCmd())
	root.AddCommand(newPlotCmd())
	root.AddCommand(newPreprocessCmd())
	return root
}

// multiValueFlags are Megatron's flags that take several values as
// separate words (argparse's nargs), with how many.
var multiValueFlags = map[string]int{"--rampup-batch-size": 3, "--data-path": 1 << 20, "--train-data-path": 1 << 20, "--valid-data-path": 1 << 20, "--test-data-path": 1 << 20, "--json-keys": 1 << 20, "--input": 1 << 20, "--cp-comm-type": 1 << 20, "--hierarchical-context-parallel-sizes": 1 << 20}

// megatronArgs rewrites Megatron's multi-word flags, as in
// "--rampup-batch-size 16 16 100000", into the comma-separated single
// word the flag parser reads ("--rampup-batch-size=16,16,100000"). It
// joins the words that follow, up to the flag's count, that are numbers
// (negative ones too, for the flag's own errors) or do not look like
// flags (the parser then names a word that is not a number); a single
// word is left as it is, for the flag's own errors. As in argparse, a
// multi-word flag given again replaces what it was given before
// (lastOccurrences), where the flag parser would add to it.
func megatronArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		n, ok := multiValueFlags[args[i]]
		if !ok {
			out = append(out, args[i])
			continue
		}
		j := i + 1
		for j < len(args) && j-i-1 < n {
			if _, err := strconv.ParseFloat(args[j], 64); err != nil && strings.HasPrefix(args[j], "-") {
				break
			}
			j++
		}
		if j-i-1 < 2 {
			out = append(out, args[i])
			continue
		}
		out = append(out, args[i]+"="+strings.Join(args[i+1:j], ","))
		i = j - 1
	}
	return lastOccurrences(out)
}

// lastOccurrences drops every occurrence of a multi-word flag but its
// last: "--flag=V" and "--flag V" (V a word that does not look like a
// flag, or a number).
func lastOccurrences(args []string) []string {
	type span struct{ at, n int }
	seen := map[string][]span{}
	for i := 0; i < len(args); i++ {
		name, _, eq := strings.Cut(args[i], "=")
		if _, ok := multiValueFlags[name]; !ok {
			continue
		}
		n := 1
		if _, err := strconv.ParseFloat(safeAt(args, i+1), 64); !eq && i+1 < len(args) && (err == nil || !strings.HasPrefix(args[i+1], "-")) {
			n = 2
		}
		seen[name] = append(seen[name], span{i, n})
		i += n - 1
	}
	drop := map[int]bool{}
	for _, spans := range seen {
		for _, sp := range spans[:len(spans)-1] {
			for k := range sp.n {
				drop[sp.at+k] = true
			}
		}
	}
	if len(drop) == 0 {
		return args
	}
	out := make([]string, 0, len(args)-len(drop))
	for i, a := range args {
		if !drop[i] {
			out = append(out, a)
		}
	}
	return out
}

// safeAt is args[i], or "" past the end.
func safeAt(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

// buildCommit is the commit make build stamps in (git describe: with
// -dirty when the tree had changes); empty for a plain go build.
var buildCommit string

// version is the build's: the commit it was built from (and whether the
// tree had changes), the commit's time, the Go version, from the build
// information the go command records, or from make build's stamp where
// the go command's is off.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(no build information)"
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	v := bi.Main.Version
	if buildCommit != "" {
		v = buildCommit
	}
	if rev := s["vcs.revision"]; rev != "" {
		v = rev[:min(12, len(rev))]
		if s["vcs.modified"] == "true" {
			v += " with local changes"
		}
		if t := s["vcs.time"]; t != "" {
			v += ", committed " + t
		}
	}
	return v + ", " + bi.GoVersion
}
