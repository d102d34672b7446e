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
