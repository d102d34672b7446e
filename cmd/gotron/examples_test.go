package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/data/tokenizer"
	"github.com/gotron/gotron/tensorboard"
)

// TestGPT3ExampleScript runs examples/gpt3-175b.sh, Megatron's GPT-3 175B
// script with its sizes scaled down, on a corpus preprocessed here with
// GPT-2's own vocab.json and merges.txt, shortened further by flags added
// after its five arguments: it trains, grows the batch by its step
// schedule, evaluates, saves, and its TensorBoard directory holds the
// scalars a Megatron user reads.
func TestGPT3ExampleScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	dir := t.TempDir()
	if err := tokenizer.WriteGPT2Files(dir); err != nil {
		t.Fatal(err)
	}
	var corpus strings.Builder
	for i := range 200 {
		fmt.Fprintf(&corpus, "{\"text\": \"Document %d of a small corpus for the GPT-3 example, with a few more words in it.\"}\n", i)
	}
	in := filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(in, []byte(corpus.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runMain(t, preprocessArgs(in, filepath.Join(dir, "corpus"))...); code != 0 {
		t.Fatalf("preprocess: status %d\n%s%s", code, out, errs)
	}
	// The script runs $GOTRON: this test binary, as gotron's main.
	wrapper := filepath.Join(dir, "gotron")
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q -test.run='^$' -- \"$@\"\n", runMainEnv, os.Args[0])
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ck, tb := filepath.Join(dir, "ck"), filepath.Join(dir, "tb")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../examples/gpt3-175b.sh", ck, tb, filepath.Join(dir, "vocab.json"), filepath.Join(dir, "merges.txt"),
		filepath.Join(dir, "corpus_text_document"),
		"--num-layers", "2", "--hidden-size", "64", "--seq-length", "64", "--max-position-embeddings", "64",
		"--step-batch-size-schedule", "0:1 256:2 512:4", "--global-batch-size", "4", "--train-iters", "20", "--lr-decay-iters", "18",
		"--eval-interval", "10", "--save-interval", "10", "--log-interval", "1")
	cmd.Env = append(os.Environ(), "GOTRON="+wrapper)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/gpt3-175b.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		"global batch by --step-batch-size-schedule: 1 from sample 0, 2 from sample 4 (token 256), 4 from sample 8 (token 512)",
		"Megatron flags accepted that change nothing on a CPU: --attention-backend auto",
		"--tokenizer-type GPT2BPETokenizer, the one that reads --vocab-file and --merge-file",
		"saved checkpoint at iteration 20",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	files, err := filepath.Glob(filepath.Join(tb, "events.out.tfevents.*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("event files %v (%v), want one", files, err)
	}
	events, err := tensorboard.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	got := tensorboard.ByTag(events)
	// Batches 1, 1, 1, 1, 2, 2, then 4 from iteration 7 (8 samples).
	for it, b := range map[int64]float32{1: 1, 4: 1, 5: 2, 6: 2, 7: 4, 20: 4} {
		if v, ok := got["batch-size"][it]; !ok || v != b {
			t.Errorf("batch-size at iteration %d: %v (%v), want %v", it, v, ok, b)
		}
	}
	for _, tag := range []string{"learning-rate", "loss-scale", "grad-norm", "lm loss", "lm loss vs samples", "lm loss validation"} {
		if len(got[tag]) == 0 {
			t.Errorf("no %q scalars; tags: %v", tag, keys(got))
		}
	}
	if v := got["lm loss validation"]; len(v) != 2 {
		t.Errorf("lm loss validation at %v, want iterations 10 and 20", v)
	}
}

// keys returns m's keys.
func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
