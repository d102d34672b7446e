package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspectScheduleJSON(t *testing.T) {
	out, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2",
		"--microbatch-group-size-per-virtual-pipeline-stage", "3", "--num-microbatches", "5", "--overlap-p2p-communication", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var doc struct {
		PP           int `json:"pp"`
		VPP          int `json:"vpp"`
		Microbatches int `json:"microbatches"`
		GroupSize    int `json:"group_size"`
		Ranks        []struct {
			Rank      int   `json:"rank"`
			Warmup    int   `json:"warmup"`
			Remaining int   `json:"remaining"`
			Order     []int `json:"order"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.PP != 2 || doc.VPP != 2 || doc.Microbatches != 5 || doc.GroupSize != 3 || len(doc.Ranks) != 2 {
		t.Fatalf("%s", out)
	}
	// The reference's docstring example (PP2, M 5, G 3, V 2, rank 0, W 5).
	r0 := doc.Ranks[0]
	want := "[1 1 1 2 2 2 -2 1 -2 1 -2 2 -1 2 -1 -1 -2 -2 -1 -1]"
	if r0.Warmup != 5 || r0.Remaining != 5 || fmt.Sprint(r0.Order) != want {
		t.Errorf("rank 0: warmup %d remaining %d order %v, want 5 5 %s", r0.Warmup, r0.Remaining, r0.Order, want)
	}
}

func TestInspectScheduleGrid(t *testing.T) {
	// M = gbs / (mbs · dp) = 16 / (2 · 8/(1·4)) = 4.
	out, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "4", "--global-batch-size", "16",
		"--micro-batch-size", "2", "--world-size", "8")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"forward_backward_pipelining_without_interleaving: pp 4, vpp 1, 4 microbatches",
		"rank 0 (W 3, R 1)", "rank 3 (W 0, R 4)", "rank 0: 4 forwards, 4 backwards, peak of 4 live activations",
		"rank 3: 4 forwards, 4 backwards, peak of 1 live activations"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectScheduleRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2", "--num-microbatches", "7",
			"--microbatch-group-size-per-virtual-pipeline-stage", "3", "--overlap-p2p-communication"},
			[]string{"7 mod 3 = 1", "--microbatch-group-size-per-virtual-pipeline-stage 4", "or 6 or 8 microbatches"}},
		{[]string{"--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2", "--num-microbatches", "4", "--no-overlap-p2p-communication"},
			[]string{"--overlap-p2p-communication", "> 2"}},
		{[]string{"--pipeline-model-parallel-size", "2", "--num-microbatches", "4", "--overlap-p2p-communication", "--no-overlap-p2p-communication"},
			[]string{"contradict"}},
		{[]string{"--pipeline-model-parallel-size", "2", "--num-microbatches", "4", "--overlap-p2p-communication"},
			[]string{"non-interleaved", "--virtual-pipeline-model-parallel-size"}},
		{[]string{"--pipeline-model-parallel-size", "2", "--global-batch-size", "10", "--micro-batch-size", "4"},
			[]string{"--global-batch-size 10", "--micro-batch-size × data-parallel size = 4 × 1 = 4"}},
		{[]string{"--pipeline-model-parallel-size", "4", "--global-batch-size", "8", "--world-size", "6"},
			[]string{"--world-size 6", "1 × 4 = 4"}},
		{[]string{"--pipeline-model-parallel-size", "2"}, []string{"--num-microbatches", "--global-batch-size"}},
	} {
		out, err := run(t, append([]string{"inspect", "schedule"}, c.args...)...)
		if err == nil {
			t.Errorf("%v: accepted:\n%s", c.args, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", c.args, err, w)
			}
		}
	}
}

// TestInspectScheduleSimulated: --stage-times plays the ranks' lists with
// the given durations: ZB-H1's makespan at P 4, M 8 and equal times is
// 3M + (P − 1) = 27, 1F1B's 3M + 3(P − 1) = 33, ZB-H2's 3M = 24 (no
// bubble), and ZB-V's, whose two chunks per rank each take half a stage's
// times, 24 too; --json carries it.
func TestInspectScheduleSimulated(t *testing.T) {
	for _, c := range []struct {
		schedule string
		makespan float64
		extra    []string
	}{{"1f1b", 33, []string{"--stage-times", "1,1,1"}}, {"zb-h1", 27, []string{"--stage-times", "1,1,1"}},
		{"zb-h2", 24, []string{"--stage-times", "1,1,1"}},
		{"zb-v", 24, []string{"--stage-times", "0.5,0.5,0.5", "--virtual-pipeline-model-parallel-size", "2"}}} {
		out, err := run(t, append([]string{"inspect", "schedule", "--pipeline-model-parallel-size", "4", "--num-microbatches", "8",
			"--pipeline-schedule", c.schedule, "--json"}, c.extra...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var doc struct {
			Simulated struct {
				Makespan   float64 `json:"makespan"`
				BubbleRate float64 `json:"bubble_rate"`
			} `json:"simulated"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if doc.Simulated.Makespan != c.makespan || doc.Simulated.BubbleRate != (c.makespan-24)/c.makespan {
			t.Errorf("%s: %+v, want makespan %g", c.schedule, doc.Simulated, c.makespan)
		}
	}
	if _, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "2", "--num-microbatches", "4", "--stage-times", "1,1"); err == nil || !strings.Contains(err.Error(), "--stage-times") {
		t.Errorf("--stage-times 1,1: %v, want it refused", err)
	}
}

// TestInspectScheduleSVG: --svg draws the simulated iteration, W's and
// the deferred output-layer step included; without --stage-times it is
// refused.
func TestInspectScheduleSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zb.svg")
	if out, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "4", "--num-microbatches", "8",
		"--pipeline-schedule", "zb-h2", "--stage-times", "1,1.4,0.6", "--svg", path); err != nil || !strings.Contains(out, path) {
		t.Fatalf("%v\n%s", err, out)
	}
	svg, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(svg), "simulated") || !strings.Contains(string(svg), ">weight gradients<") {
		t.Errorf("the drawing (%v) is not a simulated zero-bubble iteration:\n%.300s", err, svg)
	}
	if _, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "2", "--num-microbatches", "4",
		"--defer-embedding-wgrad-compute", "--stage-times", "1,1,1", "--svg", path); err != nil {
		t.Fatal(err)
	}
	if svg, _ := os.ReadFile(path); !strings.Contains(string(svg), ">deferred output-layer weight gradients<") {
		t.Errorf("the drawing has no deferred output-layer step")
	}
	if _, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "2", "--num-microbatches", "4", "--svg", path); err == nil || !strings.Contains(err.Error(), "--stage-times") {
		t.Errorf("--svg without --stage-times: %v, want it refused naming --stage-times", err)
	}
}

// TestInspectScheduleV: at P = 2, where one queue per pair of ranks would
// cross ZB-V's activations and gradients, the schedule verifies with the
// gradients on their own group, and --json names the V placement.
func TestInspectScheduleV(t *testing.T) {
	for _, s := range []string{"zb-v", "dualpipev"} {
		out, err := run(t, "inspect", "schedule", "--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2",
			"--num-microbatches", "4", "--pipeline-schedule", s, "--json")
		if err != nil || !strings.Contains(out, `"placement":"v"`) {
			t.Errorf("%s: %v\n%s", s, err, out)
		}
	}
}
