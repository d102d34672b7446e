package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gpt175B are the flags of Korthikanti et al. 2022's 175B setting with
// sequence parallelism and selective recompute (64 A100s).
var gpt175B = []string{"plan", "--num-layers", "96", "--hidden-size", "12288", "--num-attention-heads", "96",
	"--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "51200",
	"--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "8", "--world-size", "64",
	"--micro-batch-size", "1", "--global-batch-size", "64", "--bf16", "--sequence-parallel", "--recompute-activations"}

// TestPlanCommand: the text names the layout, the iteration's parts and
// each pipeline rank's memory; --json carries the fields tools read;
// --timeline draws the simulated pipeline.
func TestPlanCommand(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "plan.svg")
	out, err := run(t, append(gpt175B, "--timeline", svg)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TP 8 × CP 1 × PP 8 (VPP 1) × DP 1", "64 micro-batches", "1F1B, bf16, sequence parallel, selective recompute, flash attention",
		"pipeline bubble", "model TFLOP/s per device", "memory per device, GiB (of 80)", "drew the simulated iteration"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "  yes "); n != 8 {
		t.Errorf("%d pipeline ranks said to fit, want 8:\n%s", n, out)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "gotron plan, simulated on a100-80gb") {
		t.Errorf("timeline: %v, %.200s", err, b)
	}
	// Korthikanti et al.'s runs used Megatron's 2022 unfused attention,
	// which the paper's 13.75 s is of.
	out, err = run(t, append(gpt175B, "--json", "--attention-backend", "local")...)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Iteration float64 `json:"iteration_seconds"`
		Tokens    float64 `json:"tokens_per_second"`
		TFLOPS    float64 `json:"model_tflops_per_device"`
		Ranks     []struct {
			Memory      map[string]float64 `json:"memory"`
			MemoryBytes float64            `json:"memory_bytes"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if p.Iteration < 12 || p.Iteration > 15 || p.Tokens <= 0 || p.TFLOPS <= 0 || len(p.Ranks) != 8 {
		t.Errorf("JSON %+v: want an iteration near the paper's 13.75 s, and 8 ranks", p)
	}
	for _, k := range []string{"weights", "gradients", "optimizer", "activations"} {
		if p.Ranks[0].Memory[k] <= 0 {
			t.Errorf("rank 0's memory has no %s: %v", k, p.Ranks[0].Memory)
		}
	}
}

// TestPlanCommandErrors: a layout gotron cannot train, an unknown
// hardware name, a missing world, a training flag and what the planner
// does not model are refused, each naming the cause.
func TestPlanCommandErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "64", "--vocab-size", "128",
			"--tensor-model-parallel-size", "3", "--world-size", "3"}, "num_attention_heads 4 is not divisible by tensor_model_parallel_size 3"},
		{[]string{"plan", "--world-size", "1", "--hardware", "tpu-v9"}, "a100-80gb, h100-80gb"},
		{[]string{"plan"}, "--world-size is missing"},
		{[]string{"plan", "--world-size", "1", "--lr", "1e-4"}, "--lr is a training flag"},
		{[]string{"plan", "--world-size", "1", "--pipline-model-parallel-size", "2"}, "did you mean --pipeline-model-parallel-size?"},
		{[]string{"plan", "--calibrate", "here.json", "--world-size", "2"}, "--calibrate measures this machine and plans nothing: drop --world-size"},
		{[]string{"plan", "--world-size", "1", "--attention-backend", "local", "--use-flash-attn"}, "contradict"},
		{[]string{"plan", "--world-size", "1", "--attention-backend", "cudnn"}, "choose flash, fused, unfused, local or auto"},
		// 7B with Adam on one device: 18 bytes a parameter alone.
		{[]string{"plan", "--world-size", "1", "--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "2048",
			"--vocab-size", "51200", "--bf16"}, "the layout does not fit: 1 of 1 pipeline ranks"},
		{[]string{"plan", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "64", "--vocab-size", "128",
			"--world-size", "2", "--pipeline-model-parallel-size", "2", "--defer-embedding-wgrad-compute"}, "--defer-embedding-wgrad-compute"},
		{[]string{"plan", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "64", "--vocab-size", "128",
			"--world-size", "2", "--context-parallel-size", "2", "--cp-comm-type", "a2a"}, "--cp-comm-type a2a"},
	} {
		if _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error naming %q", c.args, err, c.want)
		}
	}
}

// TestPlanSearch: --search ranks the layouts of 16 devices that fit, keeps
// the sizes given on the command line, names the reasons of the others,
// and refuses a fixed placement of layers.
func TestPlanSearch(t *testing.T) {
	gpt7B := []string{"plan", "--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "2048",
		"--vocab-size", "51200", "--bf16", "--world-size", "16", "--global-batch-size", "64", "--search"}
	out, err := run(t, append(gpt7B, "--pipeline-model-parallel-size", "2", "--search-top", "3", "--memory-limit-gib", "40")...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "fit in 40.0 GiB a device") || !strings.HasPrefix(lines[2], "1 ") || !strings.HasPrefix(lines[4], "3 ") ||
		!strings.HasPrefix(lines[5], "rejected") {
		t.Errorf("want a header, three ranked layouts and the rejected:\n%s", out)
	}
	for _, l := range lines[2:5] {
		if !strings.Contains(l, "× PP 2") {
			t.Errorf("--pipeline-model-parallel-size 2 was not kept: %s", l)
		}
	}
	if !strings.Contains(out, "TP 1 × PP 2, micro-batch 1: weights, gradients and optimizer state alone need") {
		t.Errorf("no memory reason for TP 1 × PP 2:\n%s", out)
	}
	if _, err := run(t, append(gpt7B, "--pipeline-model-parallel-layout", "Et*16|t*16L")...); err == nil || !strings.Contains(err.Error(), "drop --pipeline-model-parallel-layout") {
		t.Errorf("a layout string with --search: %v", err)
	}
	out, err = run(t, append(gpt7B, "--tensor-model-parallel-size", "8", "--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "2", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Layouts int `json:"layouts"`
		Tried   []struct {
			Layout   string `json:"layout"`
			Rejected string `json:"rejected"`
		} `json:"tried"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Layouts == 0 || res.Layouts != len(res.Tried) {
		t.Fatalf("%d layouts, %d tried", res.Layouts, len(res.Tried))
	}
	for _, tr := range res.Tried {
		if !strings.HasPrefix(tr.Layout, "TP 8+SP") || !strings.HasSuffix(tr.Layout, "full recompute") {
			t.Errorf("layout %q: want TP 8 and full recompute, as given", tr.Layout)
		}
	}
	// Unpinned, the search tries the zero-bubble schedules; pinned, only
	// the one given.
	out, err = run(t, append(gpt7B, "--search-top", "100000")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, sched := range []string{") zb-v,", ") dualpipev,", "PP 2 zb-h1,", "PP 4 zb-h2,"} {
		if !strings.Contains(out, sched) {
			t.Errorf("the unpinned search lacks %q layouts:\n%s", sched, out)
		}
	}
	out, err = run(t, append(gpt7B, "--pipeline-schedule", "zb-h1", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	res.Tried = nil
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Tried) == 0 {
		t.Fatal("no layout tried with --pipeline-schedule zb-h1")
	}
	for _, tr := range res.Tried {
		if !strings.Contains(tr.Layout, " zb-h1,") {
			t.Errorf("layout %q with --pipeline-schedule zb-h1 pinned", tr.Layout)
		}
	}
}

// TestPlanSearchLimits: --memory-limit-gib holds for a single plan too,
// --search-top needs --search, a search where nothing fits is an error
// after its reasons, and layouts whose data-parallel size no micro-batch
// fits are refused naming the batch rather than left out.
func TestPlanSearchLimits(t *testing.T) {
	gpt := []string{"plan", "--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "2048",
		"--vocab-size", "51200", "--bf16", "--global-batch-size", "64"}
	one := append(gpt, "--world-size", "16", "--tensor-model-parallel-size", "8", "--sequence-parallel", "--pipeline-model-parallel-size", "2")
	if _, err := run(t, one...); err != nil {
		t.Fatalf("TP 8 × PP 2 of a 7B model in 80 GiB: %v", err)
	}
	if _, err := run(t, append(one, "--memory-limit-gib", "2")...); err == nil || !strings.Contains(err.Error(), "device's 2 GiB") {
		t.Errorf("the same in --memory-limit-gib 2: %v; want it not to fit", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--search-top", "3"}, "--search-top 3 without --search"},
		{[]string{"--memory-limit-gib", "NaN"}, "--memory-limit-gib NaN: give the memory a device may use"},
		{[]string{"--search", "--memory-limit-gib", "1"}, "none of the"},
	} {
		if _, err := run(t, append(append([]string{}, one...), c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.args, err, c.want)
		}
	}
	out, err := run(t, append(gpt, "--world-size", "12", "--search", "--search-top", "1")...)
	if err == nil || !strings.Contains(err.Error(), "none of the") {
		t.Errorf("12 devices, a batch of 64 (no layout fits): %v", err)
	}
	if !strings.Contains(out, "--global-batch-size") {
		t.Errorf("12 devices, a batch of 64: no layout refused naming the batch:\n%s", out)
	}
}

// TestPlanSearchExperts: for a MoE model the search tries the
// expert-parallel sizes, --expert-model-parallel-size pins one, and pinned
// flags that leave nothing to try are an error naming why.
func TestPlanSearchExperts(t *testing.T) {
	moe := []string{"plan", "--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "8", "--seq-length", "256", "--vocab-size", "1024",
		"--num-experts", "4", "--moe-router-topk", "2", "--world-size", "4", "--global-batch-size", "16", "--search", "--json"}
	layouts := func(args ...string) []string {
		t.Helper()
		out, err := run(t, append(moe, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Tried []struct {
				Layout string `json:"layout"`
			} `json:"tried"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tr := range res.Tried {
			names = append(names, tr.Layout)
		}
		return names
	}
	all := strings.Join(layouts(), "\n")
	for _, want := range []string{"TP 1 × PP 1, micro-batch", "TP 1 × PP 1, EP 2, micro-batch", "TP 1 × PP 1, EP 4, micro-batch", "TP 2+SP × PP 1, EP 2, micro-batch"} {
		if !strings.Contains(all, want) {
			t.Errorf("the MoE search lacks %q:\n%s", want, all)
		}
	}
	pinned := layouts("--expert-model-parallel-size", "2")
	if len(pinned) == 0 {
		t.Fatal("no layout with --expert-model-parallel-size 2")
	}
	for _, l := range pinned {
		if !strings.Contains(l, ", EP 2,") {
			t.Errorf("--expert-model-parallel-size 2 was not kept: %s", l)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--expert-model-parallel-size", "3"}, "not divisible by expert_model_parallel_size 3"},
		{[]string{"--pipeline-schedule", "zb-h1", "--pipeline-model-parallel-size", "1"}, "has no pipeline bubble to fill"},
		{[]string{"--micro-batch-size", "16", "--tensor-model-parallel-size", "4"}, "(--tensor-model-parallel-size 4, --micro-batch-size 16) leave no layout of 4 devices to try"},
	} {
		if _, err := run(t, append(moe, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--search with %v: %v; want an error with %q", c.args, err, c.want)
		}
	}
}

// TestPlanDeepSeekV3Shape: the seed's DeepSeek-V3 example (multi-latent
// attention, 58 MoE layers after 3 dense ones, a shared expert, an MTP
// depth on a stage of its own in the layout Et*3|(tt|)*29,m|L over 16
// pipeline ranks × 2 chunks) plans at its own tiny widths and at the real
// ones, with DualPipeV's V as well, and the experts' dispatch shows.
func TestPlanDeepSeekV3Shape(t *testing.T) {
	shape := func(h, heads, ffn, seq, q, kv, qk, rope, v, experts, eFFN, topk string) []string {
		return []string{"plan", "--num-layers", "61", "--hidden-size", h, "--num-attention-heads", heads, "--ffn-hidden-size", ffn, "--swiglu",
			"--seq-length", seq, "--max-position-embeddings", seq, "--normalization", "RMSNorm", "--qk-layernorm", "--position-embedding-type", "rope",
			"--untie-embeddings-and-output-weights", "--disable-bias-linear", "--hidden-dropout", "0", "--attention-dropout", "0", "--vocab-size", "129280",
			"--multi-latent-attention", "--q-lora-rank", q, "--kv-lora-rank", kv, "--qk-head-dim", qk, "--qk-pos-emb-head-dim", rope, "--v-head-dim", v,
			"--num-experts", experts, "--moe-layer-freq", "([0]*3+[1]*58)", "--moe-ffn-hidden-size", eFFN, "--moe-router-topk", topk,
			"--moe-shared-expert-intermediate-size", eFFN, "--moe-grouped-gemm", "--moe-token-dispatcher-type", "alltoall", "--mtp-num-layers", "1",
			"--bf16", "--use-distributed-optimizer", "--pipeline-model-parallel-size", "16", "--virtual-pipeline-model-parallel-size", "2"}
	}
	tiny := append(shape("64", "4", "128", "64", "48", "32", "16", "8", "16", "16", "32", "4"),
		"--pipeline-model-parallel-layout", "Et*3|(tt|)*29,m|L", "--world-size", "32", "--expert-model-parallel-size", "2", "--global-batch-size", "64")
	out, err := run(t, tiny...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "exposed EP communication") || !strings.Contains(out, "interleaved 1F1B") {
		t.Errorf("the tiny DeepSeek-V3 plan:\n%s", out)
	}
	real := append(shape("7168", "128", "18432", "4096", "1536", "512", "128", "64", "128", "256", "2048", "8"),
		"--pipeline-model-parallel-layout", "Et*3|(tt|)*29,m|L", "--pipeline-schedule", "dualpipev", "--world-size", "2048",
		"--expert-model-parallel-size", "64", "--global-batch-size", "15360", "--hardware", "h100-80gb", "--json")
	out, err = run(t, real...)
	if err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("DeepSeek-V3 without recompute on 80 GiB: %v; want a refusal, its activations do not fit", err)
	}
	var p struct {
		Schedule string  `json:"schedule"`
		Tokens   float64 `json:"tokens_per_second"`
		Peak     float64 `json:"peak_fraction"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Schedule != "dualpipev" || !(p.Peak > 0.1 && p.Peak < 0.9) {
		t.Errorf("DeepSeek-V3 on 2048 H100s: %v %+v", err, p)
	}
}
