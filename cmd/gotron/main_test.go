package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	args, err := commandArgs(root, args)
	if err != nil {
		return "", err
	}
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), err
}

// TestInspectGroupsJSON checks the JSON of the first worked example of
// docs/SEMANTICS.md § Rank groups (world 16, tp 2, pp 2: dp 4), typed here
// from that page.
func TestInspectGroupsJSON(t *testing.T) {
	out, err := run(t, "inspect", "groups", "--world-size", "16", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		WorldSize int                `json:"world_size"`
		Order     string             `json:"order"`
		Groups    map[string][][]int `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.WorldSize != 16 || doc.Order != "tp-cp-ep-dp-pp" {
		t.Errorf("world_size %d, order %q", doc.WorldSize, doc.Order)
	}
	want := map[string][][]int{
		"tp":    {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}},
		"dp":    {{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}},
		"pp":    {{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}},
		"tp-pp": {{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}},
	}
	for name, g := range want {
		if !reflect.DeepEqual(doc.Groups[name], g) {
			t.Errorf("%s: %v, want %v", name, doc.Groups[name], g)
		}
	}
}

// TestInspectGroupsEmbedding: the word-embedding group follows the
// pipeline flags as gotron train builds it — the first and last rank; rank
// 0 alone under the V; with an MTP stage of its own, that stage too (and
// not the last rank when the output layer is untied) — and an impossible
// layout is one error.
func TestInspectGroupsEmbedding(t *testing.T) {
	for _, c := range []struct {
		args []string
		want [][]int
	}{
		{[]string{"--pipeline-model-parallel-size", "4"}, [][]int{{0, 3}}},
		{[]string{"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--virtual-pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-v"}, [][]int{{0}, {1}}},
		{[]string{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|t|m|L"}, [][]int{{0, 2, 3}}},
		{[]string{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|t|m|L", "--untie-embeddings-and-output-weights"}, [][]int{{0, 2}}},
		{[]string{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|t|tm|L", "--untie-embeddings-and-output-weights"}, [][]int{{0, 2}}},
	} {
		out, err := run(t, append([]string{"inspect", "groups", "--world-size", "4", "--json"}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var doc struct {
			Groups map[string][][]int `json:"groups"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got := doc.Groups["embd"]; fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%v: embd %v, want %v", c.args, got, c.want)
		}
	}
	_, err := run(t, "inspect", "groups", "--world-size", "4", "--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|t|m|Lt")
	if err == nil || !strings.Contains(err.Error(), "the last layer must be the loss L") {
		t.Fatalf("a layout with a layer after the loss: %v, want the layout's error", err)
	}
}

func TestInspectGroupsTableAndErrors(t *testing.T) {
	out, err := run(t, "inspect", "groups", "--world-size", "8", "--tensor-model-parallel-size", "2")
	if err != nil || !strings.Contains(out, "tp") {
		t.Fatalf("table: %v\n%s", err, out)
	}
	_, err = run(t, "inspect", "groups", "--world-size", "6", "--tensor-model-parallel-size", "4")
	if err == nil || !strings.Contains(err.Error(), "6") || !strings.Contains(err.Error(), "4") {
		t.Fatalf("world 6 with tp 4: %v, want an error showing the arithmetic", err)
	}
}

func TestTrainFlagErrors(t *testing.T) {
	_, err := run(t, "train", "--mock-data", "--vocab-size", "64", "--num-layers", "1", "--hidden-size", "30",
		"--num-attention-heads", "4", "--seq-length", "8", "--train-iters", "1")
	if err == nil || !strings.Contains(err.Error(), "--hidden-size") {
		t.Fatalf("got %v, want an error naming --hidden-size", err)
	}
	_, err = run(t, "train", "--backend", "nccl", "--mock-data")
	if err == nil || !strings.Contains(err.Error(), "--backend") {
		t.Fatalf("got %v, want an error naming --backend", err)
	}
	for _, c := range [][]string{
		{"--pipeline-schedule", "zb-h1", "--num-layers", "2"}, // one stage: no bubble
		{"--pipeline-schedule", "zb-h9", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "2"},
		{"--pipeline-schedule", "zb-h1", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "4",
			"--virtual-pipeline-model-parallel-size", "2"},
		{"--pipeline-schedule", "zb-h2", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "4",
			"--virtual-pipeline-model-parallel-size", "2"},
		{"--pipeline-schedule", "zb-v", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "4"},
		{"--pipeline-schedule", "zb-v", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "6",
			"--virtual-pipeline-model-parallel-size", "3"},
		{"--pipeline-schedule", "dualpipev", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "4",
			"--virtual-pipeline-model-parallel-size", "2", "--global-batch-size", "2"}, // fewer than 2P microbatches
	} {
		args := append([]string{"train", "--mock-data", "--train-iters", "1", "--vocab-size", "64", "--hidden-size", "32",
			"--num-attention-heads", "4", "--seq-length", "8", "--global-batch-size", "4"}, c...)
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "--pipeline-schedule") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line naming --pipeline-schedule", c, err)
		}
	}
	// The weight-gradient flags: --delay-wgrad-compute is refused with the
	// reference's reason, --defer-embedding-wgrad-compute beside a
	// zero-bubble schedule names both.
	for _, c := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--delay-wgrad-compute", "--num-layers", "2"}, []string{"delay_wgrad_compute", "overlap_moe_expert_parallel_comm"}},
		{[]string{"--defer-embedding-wgrad-compute", "--pipeline-schedule", "zb-h2", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "2"},
			[]string{"--defer-embedding-wgrad-compute", "zb-h2"}},
		{[]string{"--defer-embedding-wgrad-compute", "--wgrad-deferral-limit", "-2", "--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "2"},
			[]string{"wgrad_deferral_limit = -2"}},
	} {
		args := append([]string{"train", "--mock-data", "--train-iters", "1", "--vocab-size", "64", "--hidden-size", "32",
			"--num-attention-heads", "4", "--seq-length", "8", "--global-batch-size", "4"}, c.flags...)
		_, err := run(t, args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("%v: %v, want one line naming %q", c.flags, err, w)
			}
		}
	}
}

// TestVersion: gotron --version names the build.
func TestVersion(t *testing.T) {
	out, err := run(t, "--version")
	if err != nil || !strings.HasPrefix(out, "gotron ") || !strings.Contains(out, "go1.") {
		t.Errorf("%q, %v", out, err)
	}
}
