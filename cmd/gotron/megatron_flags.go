package main

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// megatronFlagList is Megatron-LM's flags, one per line
// (tools/megatron-flags/extract.py).
//
//go:embed megatron_flags.txt
var megatronFlagList string

// megatronFlags is megatronFlagList as a set.
var megatronFlags = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(megatronFlagList, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "--") {
			m[l] = true
		}
	}
	return m
})

// cpuNoOp is a Megatron flag gotron train accepts and ignores because it
// chooses something a CPU run has no choice of: the numbers are the same
// whatever it says. values is how many words follow it (0 or 1).
type cpuNoOp struct {
	values int
	why    string
}

var cpuNoOps = map[string]cpuNoOp{
	"--use-mcore-models":                       {0, "gotron's GPT is Megatron-Core's GPTModel"},
	"--transformer-impl":                       {1, "gotron's layers are its own CPU kernels, built as the local spec"},
	"--attention-backend":                      {1, "gotron's attention is its own CPU kernel, an exact softmax"},
	"--use-flash-attn":                         {0, "gotron's attention is its own CPU kernel, an exact softmax"},
	"--distributed-backend":                    {1, "collectives go through --backend local or mpi"},
	"--num-workers":                            {1, "data is read in the training process"},
	"--use-cpu-initialization":                 {0, "gotron initialises every weight on the CPU, whole, then splits it"},
	"--no-masked-softmax-fusion":               {0, "fused or not, gotron's softmax gives the same numbers"},
	"--no-bias-dropout-fusion":                 {0, "fused or not, gotron's bias-dropout-add gives the same numbers"},
	"--no-rope-fusion":                         {0, "fused or not, gotron's RoPE gives the same numbers"},
	"--no-persist-layer-norm":                  {0, "a CUDA kernel choice"},
	"--no-create-attention-mask-in-dataloader": {0, "gotron's attention builds its causal mask itself"},
	"--manual-gc":                              {0, "Python's garbage collector; gotron's is Go's"},
	"--manual-gc-interval":                     {1, "Python's garbage collector; gotron's is Go's"},
	"--no-manual-gc-eval":                      {0, "Python's garbage collector; gotron's is Go's"},
	"--no-mmap-bin-files":                      {0, "how the .bin file is read; the data are the same"},
	"--deterministic-mode":                     {0, "gotron's runs are deterministic whatever the flag"},
	"--auto-detect-ckpt-format":                {0, "gotron reads its one checkpoint format (--ckpt-format torch_dist)"},
}

// commandArgs prepares a command line for the root command: Megatron's
// multi-word flags rewritten (megatronArgs) and, for gotron train, its
// flags screened (megatronFlagCheck).
func commandArgs(root *cobra.Command, args []string) ([]string, error) {
	args = megatronArgs(args)
	cmd, _, err := root.Find(args)
	if err != nil || cmd.Name() != "train" || cmd.Parent() != root {
		return args, nil
	}
	return megatronFlagCheck(cmd, args)
}

// noOpNote is the annotation of a command that holds the note about the
// Megatron flags it accepted and ignores.
const noOpNote = "gotron/megatron-no-ops"

// megatronFlagCheck screens the words of a gotron train command line
// (after megatronArgs) for flags the command does not define. Megatron's
// flags that change nothing on a CPU (cpuNoOps) are taken out, with their
// value, and named in a note on cmd (printed at start-up); every other
// unknown flag is refused, all of them in one error: a Megatron flag
// gotron lacks says so, anything else is unknown, each with the closest
// flag gotron has when one is near.
func megatronFlagCheck(cmd *cobra.Command, args []string) ([]string, error) {
	cmd.InitDefaultHelpFlag()
	flags := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	flags.AddFlagSet(cmd.Flags())
	flags.AddFlagSet(cmd.InheritedFlags())
	var kept, notes, problems []string
	reported := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			kept = append(kept, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") || len(name) < 3 {
			kept = append(kept, a)
			continue
		}
		if f := flags.Lookup(name[2:]); f != nil {
			kept = append(kept, a)
			if !hasValue && f.NoOptDefVal == "" && i+1 < len(args) { // its value, whatever it looks like
				kept = append(kept, args[i+1])
				i++
			}
			continue
		}
		if n, ok := cpuNoOps[name]; ok {
			if n.values == 1 && !hasValue {
				if i+1 == len(args) || strings.HasPrefix(args[i+1], "--") {
					problems = append(problems, fmt.Sprintf("%s takes a value (Megatron's, which gotron accepts and ignores)", name))
					continue
				}
				a += " " + args[i+1]
				i++
			}
			notes = append(notes, fmt.Sprintf("%s (%s)", a, n.why))
			continue
		}
		if !reported[name] {
			reported[name] = true
			problems = append(problems, unknownFlag(flags, name))
		}
	}
	if len(problems) > 0 {
		if len(problems) == 1 {
			return nil, fmt.Errorf("%s", problems[0])
		}
		return nil, fmt.Errorf("%d flags gotron %s does not take:\n  - %s", len(problems), cmd.Name(), strings.Join(problems, "\n  - "))
	}
	if len(notes) > 0 {
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[noOpNote] = "Megatron flags accepted that change nothing on a CPU: " + strings.Join(notes, "; ")
	}
	return kept, nil
}

// unknownFlag says why gotron does not take name, and what is near it.
func unknownFlag(flags *pflag.FlagSet, name string) string {
	msg := fmt.Sprintf("unknown flag %s", name)
	if megatronFlags()[name] {
		msg = fmt.Sprintf("%s is a Megatron flag gotron does not have (docs/USAGE.md lists what gotron builds)", name)
	}
	if near := nearestFlag(flags, name); near != "" {
		msg += "; did you mean --" + near + "?"
	}
	return msg
}

// nearestFlag is the flag of flags closest to name by edit distance, if
// it is within a third of the name's length (at most 3 edits).
func nearestFlag(flags *pflag.FlagSet, name string) string {
	want := strings.TrimPrefix(name, "--")
	limit := min(3, max(1, len(want)/3))
	var best []string
	bestD := limit + 1
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		switch d := editDistance(want, f.Name); {
		case d < bestD:
			best, bestD = []string{f.Name}, d
		case d == bestD:
			best = append(best, f.Name)
		}
	})
	if len(best) == 0 {
		return ""
	}
	sort.Strings(best)
	return best[0]
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
