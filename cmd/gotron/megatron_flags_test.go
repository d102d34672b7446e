package main

import (
	"strings"
	"testing"
)

// trainArgs is a small model's gotron train command line.
var trainArgs = []string{"train", "--mock-data", "--vocab-size", "64", "--num-layers", "1", "--hidden-size", "32",
	"--num-attention-heads", "4", "--seq-length", "8", "--global-batch-size", "4", "--train-iters", "1"}

// TestMegatronNoOpFlags: Megatron's flags that change nothing on a CPU are
// taken out of the command line, with their values, and named; a known
// flag's value is never screened, even when it looks like a flag.
func TestMegatronNoOpFlags(t *testing.T) {
	root := newRoot()
	args, err := commandArgs(root, append(append([]string{}, trainArgs...), "--use-mcore-models", "--transformer-impl", "transformer_engine",
		"--attention-backend=flash", "--sample-prompt", "--not-a-flag", "--num-workers", "8", "--lr", "1e-4"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " ")
	for _, gone := range []string{"--use-mcore-models", "--transformer-impl", "transformer_engine", "--attention-backend", "--num-workers"} {
		if strings.Contains(got+" ", gone) {
			t.Errorf("%q left in %q", gone, got)
		}
	}
	if !strings.Contains(got, "--sample-prompt --not-a-flag --lr 1e-4") {
		t.Errorf("a known flag's value was screened: %q", got)
	}
	cmd, _, _ := root.Find(args)
	note := cmd.Annotations[noOpNote]
	for _, w := range []string{"--use-mcore-models (", "--transformer-impl transformer_engine (", "--attention-backend=flash (", "--num-workers 8 ("} {
		if !strings.Contains(note, w) {
			t.Errorf("the note %q does not name %q", note, w)
		}
	}
	if _, err := run(t, append(append([]string{}, trainArgs...), "--use-cpu-initialization")...); err != nil {
		t.Fatalf("--use-cpu-initialization: %v", err)
	}
}

// TestUnknownFlags: every flag gotron train does not take is refused in
// one error: a Megatron flag gotron lacks says so, a typo gets the
// nearest flag, anything else is unknown.
func TestUnknownFlags(t *testing.T) {
	_, err := run(t, append(append([]string{}, trainArgs...), "--num-layer", "2", "--fp8-format", "hybrid", "--frobnicate", "--tensorbord-dir", "x")...)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, w := range []string{"4 flags gotron train does not take", "unknown flag --num-layer; did you mean --num-layers?",
		"--fp8-format is a Megatron flag gotron does not have", "unknown flag --frobnicate\n", "did you mean --tensorboard-dir?"} {
		if !strings.Contains(msg+"\n", w) {
			t.Errorf("%q does not say %q", msg, w)
		}
	}
	if _, err := run(t, append(append([]string{}, trainArgs...), "--fp8-format", "e4m3")...); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("one unknown flag: %v, want one line", err)
	}
	if _, err := run(t, "train", "--help"); err != nil {
		t.Errorf("--help: %v", err)
	}
	// An unknown flag given twice is named once; a no-op that takes a
	// value is refused without one.
	_, err = run(t, append(append([]string{}, trainArgs...), "--ckpt-format", "a", "--ckpt-format", "b")...)
	if err == nil || strings.Count(err.Error(), "--ckpt-format") != 1 {
		t.Errorf("a repeated unknown flag: %v, want it named once", err)
	}
	_, err = run(t, append(append([]string{}, trainArgs...), "--num-workers", "--lr", "1")...)
	if err == nil || !strings.Contains(err.Error(), "--num-workers takes a value") {
		t.Errorf("--num-workers without a value: %v", err)
	}
}

// TestMegatronFlagList: the table holds Megatron's flags, gotron's
// spellings among them.
func TestMegatronFlagList(t *testing.T) {
	m := megatronFlags()
	if len(m) < 500 {
		t.Fatalf("%d Megatron flags, want the whole list", len(m))
	}
	for _, f := range []string{"--tensor-model-parallel-size", "--pipeline-model-parallel-layout", "--use-distributed-optimizer", "--tensorboard-dir", "--ckpt-format", "--no-gradient-accumulation-fusion"} {
		if !m[f] {
			t.Errorf("%s missing", f)
		}
	}
	for name := range cpuNoOps {
		if !m[name] {
			t.Errorf("the no-op %s is not a Megatron flag", name)
		}
	}
	if d := editDistance("tensorbord-dir", "tensorboard-dir"); d != 1 {
		t.Errorf("edit distance %d, want 1", d)
	}
}
