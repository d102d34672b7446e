package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestMegatronArgs: a multi-word flag becomes one comma-separated word;
// fewer integers than it takes are left to its own error.
func TestMegatronArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"train --rampup-batch-size 16 16 1000 --lr 1", "[train --rampup-batch-size=16,16,1000 --lr 1]"},
		{"train --rampup-batch-size 16 16 1000 5", "[train --rampup-batch-size=16,16,1000 5]"},
		{"train --rampup-batch-size 16 16 --lr 1", "[train --rampup-batch-size=16,16 --lr 1]"},
		{"train --rampup-batch-size 16 --lr 1", "[train --rampup-batch-size 16 --lr 1]"},
		{"train --rampup-batch-size=4,4,8", "[train --rampup-batch-size=4,4,8]"},
		{"train --rampup-batch-size 2 x 10", "[train --rampup-batch-size=2,x,10]"},
		{"train --rampup-batch-size -1 2 3 -4", "[train --rampup-batch-size=-1,2,3 -4]"},
		// A negative weight is a word of the blend (the blend refuses it).
		{"train --data-path -0.3 A 0.7 B --lr 1", "[train --data-path=-0.3,A,0.7,B --lr 1]"},
		// Given again, a multi-word flag replaces what it was given, as in
		// argparse: make train's TRAIN_FLAGS after its defaults.
		{"train --data-path A --lr 1 --data-path 0.5 B 0.5 C", "[train --lr 1 --data-path=0.5,B,0.5,C]"},
		{"train --data-path 0.5 B 0.5 C --data-path A", "[train --data-path A]"},
		{"train --data-path=A --data-path=B --split 1,0,0", "[train --data-path=B --split 1,0,0]"},
	} {
		if got := fmt.Sprint(megatronArgs(strings.Fields(c.in))); got != c.want {
			t.Errorf("%s: %s, want %s", c.in, got, c.want)
		}
	}
}

// TestRampupBatchSizeFlag trains with Megatron's spelling of the ramp and
// refuses a ramp of two numbers.
func TestRampupBatchSizeFlag(t *testing.T) {
	model := []string{"train", "--mock-data", "--vocab-size", "64", "--num-layers", "1", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "8", "--train-samples", "40"}
	if _, err := run(t, append(model, "--rampup-batch-size", "2", "2", "16")...); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, append(model, "--rampup-batch-size", "2", "2")...); err == nil || !strings.Contains(err.Error(), "--rampup-batch-size takes three numbers") {
		t.Fatalf("two numbers: %v", err)
	}
}

// TestStepBatchSizeScheduleFlag trains with Megatron's step schedule beside
// the --global-batch-size it ends on (as Megatron's own GPT-3 example script
// passes them), and refuses a --global-batch-size it does not end on.
func TestStepBatchSizeScheduleFlag(t *testing.T) {
	model := []string{"train", "--mock-data", "--vocab-size", "64", "--num-layers", "1", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "1", "--train-iters", "6",
		"--step-batch-size-schedule", "0:2 64:4 0.192K:8"}
	if _, err := run(t, append(model, "--global-batch-size", "8")...); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, append(model, "--global-batch-size", "4")...); err == nil || !strings.Contains(err.Error(), "--global-batch-size 4 and --step-batch-size-schedule, whose last batch is 8") {
		t.Fatalf("--global-batch-size 4: %v", err)
	}
}
