//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// cpModel is a tiny model for the context-parallel flag tests: 2 layers,
// width 32, 4 heads, 2 iterations of 8 micro-batches of 1.
var cpModel = []string{"train", "--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32",
	"--num-attention-heads", "4", "--micro-batch-size", "1", "--global-batch-size", "8", "--train-iters", "2",
	"--eval-iters", "0", "--hidden-dropout", "0", "--attention-dropout", "0", "--lr-decay-iters", "10"}

// runMain runs gotron's main with args (Megatron's spelling, as a shell
// passes it) in a child process and returns its stdout, stderr and exit
// status.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("gotron %s: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// TestContextParallelFlagErrors gives `gotron train` context-parallel
// flags that cannot work: each is refused before any rank starts (nothing
// on stdout, where rank 0 prints its banner and iterations), with status 1
// and one line on stderr, "gotron: invalid arguments: …", naming the
// settings and the fix.
func TestContextParallelFlagErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra []string
		want  []string
		n     int // violations listed, when more than 1
	}{
		{"seq not a multiple of 2·cp",
			[]string{"--world-size", "2", "--context-parallel-size", "2", "--seq-length", "30"},
			[]string{"seq_length 30", "context_parallel_size", "2·2 = 4", "--seq-length a multiple of 4"}, 0},
		{"seq not a multiple of 2·cp·tp under sequence parallelism",
			[]string{"--world-size", "4", "--context-parallel-size", "2", "--tensor-model-parallel-size", "2",
				"--sequence-parallel", "--seq-length", "36"},
			[]string{"seq_length 36", "context_parallel_size", "tensor_model_parallel_size", "2·2·2 = 8", "--seq-length a multiple of 8"}, 0},
		{"a2a with heads not divisible by cp",
			[]string{"--world-size", "2", "--context-parallel-size", "2", "--seq-length", "32", "--cp-comm-type", "a2a",
				"--num-attention-heads", "3", "--hidden-size", "48"},
			[]string{"cp_comm_type a2a", "num_attention_heads 3", "over the 2 ranks", "--num-attention-heads a multiple of 2", "--cp-comm-type p2p"}, 0},
		{"a2a+p2p without hierarchical sizes",
			[]string{"--world-size", "4", "--context-parallel-size", "4", "--seq-length", "32", "--cp-comm-type", "a2a+p2p"},
			[]string{"cp_comm_type a2a+p2p", "hierarchical_context_parallel_sizes", "two levels", "--hierarchical-context-parallel-sizes A P", "A·P = 4"}, 0},
		{"hierarchical sizes not multiplying to cp",
			[]string{"--world-size", "2", "--hierarchical-context-parallel-sizes", "2", "2", "--context-parallel-size", "2", "--seq-length", "32"},
			[]string{"hierarchical_context_parallel_sizes [2 2]", "2·2 = 4", "context_parallel_size = 2", "must equal context_parallel_size"}, 0},
		{"hierarchical level below 1 (Megatron spelling, negative word)",
			[]string{"--world-size", "4", "--context-parallel-size", "4", "--seq-length", "32", "--cp-comm-type", "a2a+p2p",
				"--hierarchical-context-parallel-sizes", "4", "-1"},
			[]string{"hierarchical_context_parallel_sizes[1] = -1", "≥ 1"}, 0},
		{"unknown comm type",
			[]string{"--world-size", "2", "--context-parallel-size", "2", "--seq-length", "32", "--cp-comm-type", "bogus"},
			[]string{`cp_comm_type "bogus"`, "p2p, all_gather, a2a, a2a+p2p", "--cp-comm-type"}, 0},
		{"comm types not one per layer (Megatron spelling)",
			[]string{"--world-size", "2", "--context-parallel-size", "2", "--seq-length", "32", "--cp-comm-type", "p2p", "a2a", "p2p"},
			[]string{"cp_comm_type lists 3 values for 2 layers", "one per layer"}, 0},
		// Without --world-size the in-process world is 1 rank, which cp 2
		// does not divide: both problems are listed at once.
		{"seq not a multiple of 2·cp, world size 1",
			[]string{"--context-parallel-size", "2", "--seq-length", "30"},
			[]string{"seq_length 30", "--seq-length a multiple of 4", "world_size 1", "context_parallel_size = 1·1·2 = 2"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runMain(t, append(slices.Clone(cpModel), c.extra...)...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("refused after ranks started: stdout\n%s", stdout)
			}
			msg := strings.TrimSuffix(stderr, "\n")
			if c.n > 1 {
				if head := fmt.Sprintf("gotron: invalid arguments (%d):\n", c.n); !strings.HasPrefix(msg, head) || strings.Count(msg, "\n  - ") != c.n {
					t.Errorf("stderr does not list %d errors after %q:\n%s", c.n, head, stderr)
				}
			} else if !strings.HasPrefix(msg, "gotron: invalid arguments: ") || strings.Contains(msg, "\n") {
				t.Errorf("stderr is not one line \"gotron: invalid arguments: …\":\n%s", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestContextParallelFlagsParse reads Megatron's multi-word spellings of
// --cp-comm-type and --hierarchical-context-parallel-sizes, in any order
// among the other flags, into the values they name.
func TestContextParallelFlagsParse(t *testing.T) {
	for _, c := range []struct {
		args   string
		cp     int
		comm   []string
		hier   []int
		others []string // the flags after them, still read
	}{
		{"--hierarchical-context-parallel-sizes 2 2 --context-parallel-size 4 --cp-comm-type a2a+p2p",
			4, []string{"a2a+p2p"}, []int{2, 2}, nil},
		{"--context-parallel-size 4 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2 --seq-length 64",
			4, []string{"a2a+p2p"}, []int{2, 2}, []string{"seq-length=64"}},
		{"--cp-comm-type p2p a2a --context-parallel-size 2 --mock-data",
			2, []string{"p2p", "a2a"}, nil, []string{"mock-data=true"}},
		{"--cp-comm-type p2p all_gather a2a a2a+p2p --num-layers 4",
			1, []string{"p2p", "all_gather", "a2a", "a2a+p2p"}, nil, []string{"num-layers=4"}},
		{"--cp-comm-type=all_gather,a2a --hierarchical-context-parallel-sizes=2,4",
			1, []string{"all_gather", "a2a"}, []int{2, 4}, nil},
		{"--cp-comm-type all_gather", 1, []string{"all_gather"}, nil, nil},
	} {
		cmd := newTrainCmd()
		if err := cmd.ParseFlags(megatronArgs(strings.Fields(c.args))); err != nil {
			t.Errorf("%s: %v", c.args, err)
			continue
		}
		f := cmd.Flags()
		if rest := f.Args(); len(rest) != 0 {
			t.Errorf("%s: words left over %q", c.args, rest)
		}
		cp, _ := f.GetInt("context-parallel-size")
		comm, _ := f.GetStringSlice("cp-comm-type")
		hier, _ := f.GetIntSlice("hierarchical-context-parallel-sizes")
		if cp != c.cp || !slices.Equal(comm, c.comm) || !slices.Equal(hier, c.hier) {
			t.Errorf("%s: cp %d, comm %q, hierarchical %v; want %d, %q, %v", c.args, cp, comm, hier, c.cp, c.comm, c.hier)
		}
		for _, o := range c.others {
			name, want, _ := strings.Cut(o, "=")
			if got := f.Lookup(name).Value.String(); got != want {
				t.Errorf("%s: --%s %s, want %s", c.args, name, got, want)
			}
		}
	}
}

// TestMegatronArgsContextParallel: --cp-comm-type and
// --hierarchical-context-parallel-sizes take any number of words, joined
// up to the next flag; one word is left as it is.
func TestMegatronArgsContextParallel(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"train --cp-comm-type p2p a2a --lr 1", "[train --cp-comm-type=p2p,a2a --lr 1]"},
		{"train --cp-comm-type p2p a2a", "[train --cp-comm-type=p2p,a2a]"},
		{"train --cp-comm-type p2p --lr 1", "[train --cp-comm-type p2p --lr 1]"},
		{"train --cp-comm-type p2p all_gather a2a a2a+p2p p2p all_gather a2a a2a+p2p --mock-data",
			"[train --cp-comm-type=p2p,all_gather,a2a,a2a+p2p,p2p,all_gather,a2a,a2a+p2p --mock-data]"},
		{"train --cp-comm-type=p2p,a2a --lr 1", "[train --cp-comm-type=p2p,a2a --lr 1]"},
		{"train --hierarchical-context-parallel-sizes 2 2 --context-parallel-size 4 --cp-comm-type a2a+p2p",
			"[train --hierarchical-context-parallel-sizes=2,2 --context-parallel-size 4 --cp-comm-type a2a+p2p]"},
		{"train --hierarchical-context-parallel-sizes 2 2 2 --context-parallel-size 8",
			"[train --hierarchical-context-parallel-sizes=2,2,2 --context-parallel-size 8]"},
		{"train --hierarchical-context-parallel-sizes 4 -1 --lr 1", "[train --hierarchical-context-parallel-sizes=4,-1 --lr 1]"},
		{"train --hierarchical-context-parallel-sizes 4 --lr 1", "[train --hierarchical-context-parallel-sizes 4 --lr 1]"},
		{"train --cp-comm-type p2p a2a --hierarchical-context-parallel-sizes 2 2",
			"[train --cp-comm-type=p2p,a2a --hierarchical-context-parallel-sizes=2,2]"},
	} {
		if got := fmt.Sprint(megatronArgs(strings.Fields(c.in))); got != c.want {
			t.Errorf("%s: %s, want %s", c.in, got, c.want)
		}
	}
}

// TestContextParallelFlagsTrain trains 2 iterations through main with
// Megatron's spellings: hierarchical a2a+p2p on 4 ranks (the sizes given
// before --context-parallel-size), and a comm type per layer on 2.
func TestContextParallelFlagsTrain(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"a2a+p2p 2·2", []string{"--world-size", "4", "--seq-length", "32", "--hierarchical-context-parallel-sizes", "2", "2",
			"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p"}, "world 4 (context parallel 4 (a2a+p2p), data parallel 1,"},
		{"p2p then a2a", []string{"--world-size", "2", "--seq-length", "32", "--context-parallel-size", "2",
			"--cp-comm-type", "p2p", "a2a"}, "world 2 (context parallel 2 (p2p, a2a), data parallel 1,"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runMain(t, append(slices.Clone(cpModel), c.extra...)...)
			if code != 0 {
				t.Fatalf("exit status %d:\n%s%s", code, stdout, stderr)
			}
			// Data parallel 1 on the whole world: every rank is a
			// context-parallel rank.
			if !strings.Contains(stdout, c.want) || !strings.Contains(stdout, "iteration        2/       2") {
				t.Errorf("stdout lacks %q or iteration 2:\n%s", c.want, stdout)
			}
		})
	}
}
