//go:build mpi

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
	"github.com/gotron/gotron/train"
)

// TestMPITrainMatchesSingleRank runs `mpirun gotron train --backend mpi
// --mock-data` for 20 iterations in eight layouts — data parallel over 2
// processes, tensor and sequence parallel over 2, TP 2 × DP 2 with full
// recompute over 4, pipeline parallel over 2, TP 2 × PP 2 with two
// virtual stages per pipeline rank (interleaved 1F1B) over 4, DP 2 with the
// distributed optimizer and both overlaps, DP 4 with two distributed
// optimizer instances and overlapped reduction over 4, and TP 2 × PP 2 ×
// DP 2 with the distributed optimizer and both overlaps over 8, ZB-H2 over
// four pipeline stages and ZB-H1 beside DP 2 over 4, PP 2 with the output
// layer's weight gradients deferred to the flush over 2 — and compares
// each loss curve with a single in-process rank's: equal to 1e-6 relative
// without tensor parallelism, 1e-5 with it (whose sums are split
// differently). Two bf16 runs with the distributed optimizer (float32 and
// bfloat16 gradient buffers, the latter reduced in bfloat16 through MPI)
// follow the one-rank bf16 curve to 1e-4 and 1e-3. Megatron-FSDP's ZeRO-3
// over 4 processes follows the one-rank curve to 1e-6, its ZeRO-2 in bf16
// over 2 the bf16 one to 1e-4. Context parallel 2
// (the ring) and 4 (a2a+p2p, 2·2) follow it to 1e-6. A MoE model with its
// experts over 2 processes (each dispatcher), and over 2 × expert TP 2 on
// 4, follows the one-rank MoE curve to 1e-6. Indexed data with packed
// documents (--reset-position-ids --reset-attention-mask --eod-mask-loss)
// under DP 2 × CP 2, every process building the sample indices into one
// cache, follows the one-rank curve to 1e-6. With dropout on, TP 2 + SP ×
// DP 2 over 4 processes follows the one-rank dropout curve to 1e-5.
func TestMPITrainMatchesSingleRank(t *testing.T) {
	dir, bin := buildMPI(context.Background(), t)
	flags := []string{"--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "1", "--global-batch-size", "8",
		"--train-iters", "20", "--lr", "3e-3", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine",
		"--hidden-dropout", "0", "--attention-dropout", "0", "--eval-iters", "0", "--log-interval", "10"}
	layouts := []struct {
		name  string
		np    string
		extra []string
		tol   float64
		prec  string // "" float32, "bf16", "bf16-grads" (--bf16 --grad-reduce-in-bf16): the reference's precision; "moe": the MoE model; "dropout": dropout 0.1
		says  string // what rank 0's start-up line must say, if set
	}{
		{"dp2", "2", nil, 1e-6, "", ""},
		{"tp2-sp", "2", []string{"--tensor-model-parallel-size", "2", "--sequence-parallel"}, 1e-5, "", ""},
		{"tp2-dp2-full-recompute", "4", []string{"--tensor-model-parallel-size", "2", "--recompute-granularity", "full",
			"--recompute-method", "uniform", "--recompute-num-layers", "1"}, 1e-5, "", ""},
		{"pp2", "2", []string{"--pipeline-model-parallel-size", "2"}, 1e-6, "", ""},
		{"tp2-pp2-vpp2-layout", "4", []string{"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
			"--pipeline-model-parallel-layout", "E|t|t|L"}, 1e-5, "", ""},
		{"dp2-distopt-overlaps", "2", []string{"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
			"--ddp-bucket-size", "2000"}, 1e-6, "", ""},
		{"dp4-distopt-2-instances", "4", []string{"--use-distributed-optimizer", "--num-distributed-optimizer-instances", "2",
			"--overlap-grad-reduce", "--ddp-num-buckets", "4"}, 1e-6, "", ""},
		{"tp2-pp2-dp2-distopt-overlaps", "8", []string{"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
			"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"}, 1e-5, "", ""},
		// Zero-bubble schedules: ZB-H2 over a four-stage pipeline (the
		// embedding and the loss stages of their own), ZB-H1 beside DP 2
		// with the distributed optimizer's overlapped reduction.
		{"pp4-layout-zb-h2", "4", []string{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "E|t|t|L",
			"--pipeline-schedule", "zb-h2"}, 1e-6, "", ""},
		{"pp2-dp2-distopt-zb-h1", "4", []string{"--pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-h1",
			"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"}, 1e-6, "", ""},
		{"pp2-defer-embedding-wgrad", "2", []string{"--pipeline-model-parallel-size", "2", "--defer-embedding-wgrad-compute",
			"--wgrad-deferral-limit", "3"}, 1e-6, "", ""},
		// Megatron-FSDP: ZeRO-3 over 4 processes (every layer's gathers
		// and reduce-scatters through MPI), ZeRO-2 over 2 in bf16.
		{"dp4-fsdp-optim_grads_params", "4", []string{"--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params"},
			1e-6, "", "Megatron-FSDP optim_grads_params"},
		{"bf16-dp2-fsdp-optim_grads", "2", []string{"--bf16", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"},
			1e-4, "bf16", "Megatron-FSDP optim_grads"},
		// Mixed precision: bf16 with float32 gradients (the tolerance of
		// train's TestMixedPrecisionLayouts), and with bfloat16 gradient
		// buffers reduced in bfloat16 over MPI.
		{"bf16-dp2-distopt-overlaps", "2", []string{"--bf16", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
			"--ddp-bucket-size", "2000"}, 1e-4, "bf16", ""},
		{"bf16-grads-bf16-dp2-distopt", "2", []string{"--bf16", "--grad-reduce-in-bf16", "--use-distributed-optimizer"}, 1e-3, "bf16-grads", ""},
		// Context parallel: the p2p ring over 2 processes, and a2a+p2p
		// (an all-to-all inside each pair, a ring across them) over 2·2;
		// every process is a context-parallel rank of one replica.
		{"cp2-p2p", "2", []string{"--context-parallel-size", "2", "--cp-comm-type", "p2p"}, 1e-6, "", "world 2 (context parallel 2 (p2p), data parallel 1,"},
		{"cp4-a2a+p2p-2x2", "4", []string{"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p",
			"--hierarchical-context-parallel-sizes", "2", "2"}, 1e-6, "", "world 4 (context parallel 4 (a2a+p2p), data parallel 1,"},
		// Expert parallel: the MoE model (mpiMoEFlags) with its 4 experts
		// over 2 processes, each dispatcher, and over 2 × expert TP 2.
		{"moe-ep2-alltoall", "2", mpiMoEArgs("--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", "alltoall"), 1e-6, "moe", ""},
		{"moe-ep2-allgather", "2", mpiMoEArgs("--expert-model-parallel-size", "2"), 1e-6, "moe", ""},
		{"moe-ep2-etp2-alltoall", "4", mpiMoEArgs("--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "2",
			"--moe-token-dispatcher-type", "alltoall"), 1e-6, "moe", ""},
		// Indexed data with packed documents (mpiIndexedData): every
		// process builds the same sample indices into one cache, and DP 2 ×
		// CP 2 follows one rank.
		{"indexed-dp2-cp2-packed", "4", []string{"--context-parallel-size", "2"}, 1e-6, "indexed", ""},
		// Dropout on (hidden and attention 0.1): its masks are keyed by
		// the sample and the place in the whole tensor, so TP 2 × DP 2
		// over 4 processes follows the one-rank curve with dropout.
		{"dropout-tp2-sp-dp2", "4", []string{"--tensor-model-parallel-size", "2", "--sequence-parallel",
			"--hidden-dropout", "0.1", "--attention-dropout", "0.1"}, 1e-5, "dropout", ""},
	}
	dataArgs := mpiIndexedData(t, dir)
	curves := make([][]float64, len(layouts))
	for i, l := range layouts {
		logPath := filepath.Join(dir, l.name+".jsonl")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		f := flags
		if l.prec == "indexed" {
			f = append(slices.Clone(flags[1:]), dataArgs...) // no --mock-data
		}
		args := append(append(append([]string{"--allow-run-as-root", "--oversubscribe", "-np", l.np, bin, "train", "--backend", "mpi"}, f...), l.extra...), "--log-json", logPath)
		out, err := exec.CommandContext(ctx, "mpirun", args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: mpirun: %v\n%s", l.name, err, out)
		}
		if l.says != "" && !strings.Contains(string(out), l.says) {
			t.Errorf("%s: rank 0 does not say %q:\n%s", l.name, l.says, out)
		}
		curves[i] = readLosses(t, logPath)
	}

	a := train.DefaultArgs()
	a.MockData = true
	a.Model.VocabSize, a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads, a.Model.SeqLength = 64, 2, 32, 4, 16
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 1, 8, 20
	a.LR, a.LRWarmupIters, a.LRDecayStyle = 3e-3, 2, "cosine"
	a.Model.HiddenDropout, a.Model.AttentionDropout, a.EvalIters = 0, 0, 0
	refs := map[string]*train.Result{}
	for _, prec := range []string{"", "bf16", "bf16-grads", "moe", "indexed", "dropout"} {
		b := a
		if prec == "dropout" {
			b.Model.HiddenDropout, b.Model.AttentionDropout = 0.1, 0.1
		}
		b.Model.BF16, b.GradReduceInBF16 = prec == "bf16" || prec == "bf16-grads", prec == "bf16-grads"
		if prec == "moe" {
			m := &b.Model
			m.NumMoEExperts, m.MoEFFNHiddenSize, m.MoEAuxLossCoeff, m.MoEZLossCoeff, m.AddBiasLinear = 4, 16, 0.01, 0.001, false
		}
		if prec == "indexed" {
			b.MockData, b.DataPath, b.Tokenizer = false, []string{dataArgs[1]}, tokenizer.Options{Type: tokenizer.TypeNull, VocabSize: 64}
			b.ResetPositionIDs, b.ResetAttentionMask, b.EODMaskLoss = true, true, true
		}
		r, err := train.Run(context.Background(), b, train.Options{})
		if err != nil {
			t.Fatal(err)
		}
		refs[prec] = r
	}
	for k, l := range layouts {
		ref := refs[l.prec]
		got := curves[k]
		if len(got) != len(ref.Losses) {
			t.Fatalf("%s: mpirun logged %d iterations, want %d", l.name, len(got), len(ref.Losses))
		}
		worst := 0.0
		for i := range got {
			e := math.Abs(got[i]-ref.Losses[i]) / math.Abs(ref.Losses[i])
			worst = math.Max(worst, e)
			if e > l.tol {
				t.Errorf("%s: iteration %d: %s MPI ranks %.9f, one rank %.9f (relative %.2g > %g)", l.name, i+1, l.np, got[i], ref.Losses[i], e, l.tol)
			}
		}
		t.Logf("%s: largest relative loss difference from one rank %.2g", l.name, worst)
	}
}

// mpiIndexedData writes an indexed dataset of 200 documents of 1 to 40
// random ids below 63, each ended by NullTokenizer's end of document 63,
// and returns the flags that train on it packed.
func mpiIndexedData(t *testing.T, dir string) []string {
	prefix := filepath.Join(dir, "docs_text_document")
	w, err := indexed.Create(prefix, indexed.OptimalDType(64))
	if err != nil {
		t.Fatal(err)
	}
	g := rand.New(rand.NewPCG(7, 11))
	for range 200 {
		doc := make([]int32, 1+g.IntN(40))
		for i := range doc {
			doc[i] = int32(g.IntN(63))
		}
		if err := w.AddDocument(append(doc, 63), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return []string{"--data-path", prefix, "--tokenizer-type", "NullTokenizer", "--vocab-size", "64",
		"--reset-position-ids", "--reset-attention-mask", "--eod-mask-loss"}
}

// mpiMoEFlags make the MPI test's model a MoE model: 4 experts of width 16
// in both layers, top-2 softmax routing with the load-balancing (0.01) and
// z (0.001) losses, no biases.
var mpiMoEFlags = []string{"--num-experts", "4", "--moe-ffn-hidden-size", "16", "--moe-aux-loss-coeff", "0.01",
	"--moe-z-loss-coeff", "0.001", "--disable-bias-linear"}

// mpiMoEArgs returns mpiMoEFlags followed by extra.
func mpiMoEArgs(extra ...string) []string { return append(slices.Clone(mpiMoEFlags), extra...) }

func readLosses(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	s := bufio.NewScanner(f)
	for s.Scan() {
		var r struct {
			Iteration int      `json:"iteration"`
			Loss      *float64 `json:"loss"`
		}
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Loss != nil {
			if r.Iteration != len(out)+1 {
				t.Fatalf("%s: iteration %s out of order", path, strconv.Itoa(r.Iteration))
			}
			out = append(out, *r.Loss)
		}
	}
	return out
}
