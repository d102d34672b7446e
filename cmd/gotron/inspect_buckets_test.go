package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/internal/golden"
	"github.com/gotron/gotron/models/gpt"
)

// smallModel is a model whose sizes are not multiples of 64 (h 24, ffn 40,
// 16 positions, vocabulary 100 unpadded), so the distributed optimizer's
// alignment shows.
var smallModel = []string{"--hidden-size", "24", "--num-attention-heads", "4", "--ffn-hidden-size", "40",
	"--seq-length", "16", "--vocab-size", "100", "--make-vocab-size-divisible-by", "1"}

// bucketsGoldens are the settings whose output is recorded under testdata/
// as inspect_buckets_<name>.txt (table) and .json.
var bucketsGoldens = []struct {
	name string
	args []string
}{
	// One stage, dp 2, buckets of ≥ 2000 elements.
	{"distopt_dp2", []string{"--num-layers", "2", "--data-parallel-size", "2", "--use-distributed-optimizer", "--overlap-grad-reduce", "--ddp-bucket-size", "2000"}},
	// The last of two stages: the tied embedding's bucket of its own, dp 8
	// in 2 optimizer instances of 4 shards, busbw padding.
	{"pp2_rank1_instances", []string{"--num-layers", "4", "--pipeline-model-parallel-size", "2", "--pipeline-rank", "1", "--world-size", "16",
		"--use-distributed-optimizer", "--num-distributed-optimizer-instances", "2", "--ddp-pad-buckets-for-high-nccl-busbw"}},
	// Megatron-FSDP ZeRO-3 on the last of two stages, dp 2: a unit per
	// layer, then the tied embedding alone, then the final norm.
	{"fsdp_zero3_pp2_rank1", []string{"--num-layers", "4", "--pipeline-model-parallel-size", "2", "--pipeline-rank", "1", "--world-size", "4",
		"--use-megatron-fsdp"}},
	// Two chunks per rank without the distributed optimizer: only chunk 0
	// is bucketed (7264 elements / 3 buckets), no shards.
	{"vpp2_plain", []string{"--num-layers", "4", "--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2",
		"--data-parallel-size", "2", "--overlap-grad-reduce", "--ddp-num-buckets", "3", "--tensor-model-parallel-size", "2"}},
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.Check(t, path, got)
}

func TestInspectBucketsGolden(t *testing.T) {
	for _, g := range bucketsGoldens {
		args := append(append([]string{"inspect", "buckets"}, smallModel...), g.args...)
		for _, form := range []struct {
			ext   string
			extra []string
		}{{".txt", nil}, {".json", []string{"--json"}}} {
			out, err := run(t, append(args, form.extra...)...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", g.name, err, out)
			}
			checkGolden(t, filepath.Join("testdata", "inspect_buckets_"+g.name+form.ext), []byte(out))
		}
	}
}

// bucketsDocShape is the --json document as the command's help gives it,
// key for key and in order; TestInspectBucketsJSON re-encodes the output
// through it and expects the same bytes.
type bucketsDocShape struct {
	Buffers []struct {
		DType         string `json:"dtype"`
		Numel         int    `json:"numel"`
		NumelUnpadded int    `json:"numel_unpadded"`
		Buckets       []struct {
			Start         int `json:"start"`
			End           int `json:"end"`
			NumelUnpadded int `json:"numel_unpadded"`
			Params        []struct {
				Name  string `json:"name"`
				Start int    `json:"start"`
				End   int    `json:"end"`
			} `json:"params"`
		} `json:"buckets"`
	} `json:"buffers"`
	Shards []struct {
		DPRank  int `json:"dp_rank"`
		Buckets []struct {
			WorldRange [2]int `json:"world_range"`
			Params     []struct {
				Name       string `json:"name"`
				GbufLocal  [2]int `json:"gbuf_local"`
				ParamRange [2]int `json:"param_range"`
			} `json:"params"`
		} `json:"buckets"`
	} `json:"shards"`
}

// TestInspectBucketsJSON checks the JSON of an interleaved pipeline (pp 2,
// vpp 2, rank 0: chunks E t0 and t2) under the distributed optimizer with
// dp 4 in 2 instances against dp.ChunkLayout and gpt.ChunkParamSpecs called
// directly: every buffer and bucket, and every dp rank's shard (rank q holds
// shard q mod 2) of every bucket, buffer by buffer.
func TestInspectBucketsJSON(t *testing.T) {
	args := append(append([]string{"inspect", "buckets", "--json"}, smallModel...),
		"--num-layers", "4", "--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2",
		"--data-parallel-size", "4", "--overlap-grad-reduce", "--ddp-bucket-size", "1500")
	out, err := run(t, append(args, "--use-distributed-optimizer", "--num-distributed-optimizer-instances", "2")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var doc bucketsDocShape
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if again, _ := json.Marshal(doc); string(again) != strings.TrimSpace(out) {
		t.Fatalf("the output is not exactly the documented shape:\n got %s\nwant %s", strings.TrimSpace(out), again)
	}

	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.FFNHiddenSize, cfg.SeqLength = 4, 24, 4, 40, 16
	cfg.VocabSize, cfg.MakeVocabSizeDivisibleBy = 100, 1
	cfg.PipelineModelParallelSize, cfg.VirtualPipelineModelParallelSize = 2, 2
	ddp := config.DefaultDDPConfig()
	ddp.UseDistributedOptimizer, ddp.NumDistributedOptimizerInstances, ddp.OverlapGradReduce, ddp.BucketSize = true, 2, true, 1500
	chunks, err := cfg.PipelineChunks()
	if err != nil {
		t.Fatal(err)
	}
	var layouts []dp.Layout
	for v, ch := range chunks[0] {
		specs, err := gpt.ChunkParamSpecs(cfg, 1, gpt.ChunkSpec{PreProcess: ch.PreProcess, PostProcess: ch.PostProcess, LayerOffset: ch.LayerOffset, NumLayers: ch.NumLayers})
		if err != nil {
			t.Fatal(err)
		}
		params := make([]dp.LayoutParam, len(specs))
		for i, s := range specs {
			params[i] = dp.LayoutParam{Name: s.Name, Numel: s.Numel(), SharedEmbedding: s.SharedEmbedding}
		}
		layouts = append(layouts, dp.ChunkLayout(params, ddp, 4, 0, v))
	}
	if len(doc.Buffers) != 2 || len(layouts) != 2 {
		t.Fatalf("%d buffers, want 2", len(doc.Buffers))
	}
	if len(layouts[0].Buckets) < 2 || len(layouts[1].Buckets) != 1 {
		t.Errorf("chunk 0 in %d buckets, chunk 1 in %d: want chunk 0 bucketed, chunk 1 one bucket", len(layouts[0].Buckets), len(layouts[1].Buckets))
	}
	total := 0
	for b, l := range layouts {
		buf := doc.Buffers[b]
		if buf.DType != "float32" || buf.Numel != l.Numel || buf.NumelUnpadded != l.NumelUnpadded || len(buf.Buckets) != len(l.Buckets) {
			t.Fatalf("buffer %d: %s %d/%d in %d buckets, want float32 %d/%d in %d", b, buf.DType, buf.Numel, buf.NumelUnpadded, len(buf.Buckets), l.Numel, l.NumelUnpadded, len(l.Buckets))
		}
		for k, bk := range l.Buckets {
			got := buf.Buckets[k]
			if got.Start != bk.Start || got.End != bk.End || got.NumelUnpadded != bk.NumelUnpadded || len(got.Params) != len(bk.Params) {
				t.Fatalf("buffer %d bucket %d: %+v, want %+v", b, k, got, bk)
			}
			for j, i := range bk.Params {
				if p := got.Params[j]; p.Name != l.Params[i].Name || p.Start != l.Ranges[i].Start || p.End != l.Ranges[i].End {
					t.Errorf("buffer %d bucket %d parameter %d: %+v, want %s %+v", b, k, j, p, l.Params[i].Name, l.Ranges[i])
				}
			}
		}
		total += len(l.Buckets)
	}
	if len(doc.Shards) != 4 {
		t.Fatalf("shards of %d ranks, want 4", len(doc.Shards))
	}
	for q, rs := range doc.Shards {
		if rs.DPRank != q || len(rs.Buckets) != total {
			t.Fatalf("shard entry %d: rank %d with %d buckets, want rank %d with %d", q, rs.DPRank, len(rs.Buckets), q, total)
		}
		at := 0
		for b, l := range layouts {
			shards, err := l.Shard(2, q%2)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range shards {
				got := rs.Buckets[at]
				at++
				if got.WorldRange != s.World || len(got.Params) != len(s.Params) {
					t.Fatalf("rank %d buffer %d bucket %d: world %v with %d pieces, want %v with %d", q, b, s.Bucket, got.WorldRange, len(got.Params), s.World, len(s.Params))
				}
				for j, p := range s.Params {
					g := got.Params[j]
					if g.Name != l.Params[p.Param].Name || g.GbufLocal != p.GbufLocal || g.ParamRange != p.ParamRange {
						t.Errorf("rank %d buffer %d bucket %d piece %d: %+v, want %s %v %v", q, b, s.Bucket, j, g, l.Params[p.Param].Name, p.GbufLocal, p.ParamRange)
					}
				}
			}
		}
	}
	if !reflect.DeepEqual(doc.Shards[0].Buckets, doc.Shards[2].Buckets) || reflect.DeepEqual(doc.Shards[0].Buckets, doc.Shards[1].Buckets) {
		t.Error("ranks 0 and 2 (one shard in two instances) should agree, ranks 0 and 1 differ")
	}

	// Without the distributed optimizer: "shards": [].
	out, err = run(t, args...)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), `"shards":[]}`) {
		t.Errorf("without the distributed optimizer: %v\n%s", err, out)
	}

	// Context parallelism: the buffers are sharded over dp·cp = 2·2 ranks.
	out, err = run(t, append(append([]string{"inspect", "buckets", "--json", "--num-layers", "2"}, smallModel...),
		"--data-parallel-size", "2", "--context-parallel-size", "2", "--use-distributed-optimizer")...)
	doc = bucketsDocShape{}
	if err == nil {
		err = json.Unmarshal([]byte(out), &doc)
	}
	if err != nil || len(doc.Shards) != 4 || len(doc.Buffers) != 1 || doc.Buffers[0].Numel%dp.BucketEndDivisor(4, false) != 0 {
		t.Errorf("dp 2, cp 2: %v, %d shards\n%s", err, len(doc.Shards), out)
	}
}

// TestInspectBucketsErrors: bad flag combinations give one error naming
// the rule, no output and no stack trace.
func TestInspectBucketsErrors(t *testing.T) {
	base := append([]string{"inspect", "buckets", "--num-layers", "2"}, smallModel...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--overlap-grad-reduce", "--ddp-bucket-size", "-5"}, "bucket_size = -5 elements: must be greater than 0"},
		{[]string{"--overlap-grad-reduce", "--ddp-bucket-size", "100", "--ddp-num-buckets", "2"}, "num_buckets = 2 and bucket_size = 100 are both set"},
		{[]string{"--use-distributed-optimizer", "--data-parallel-size", "6", "--num-distributed-optimizer-instances", "4"},
			"num_distributed_optimizer_instances = 4 must divide dp·context_parallel_size = 6·1 = 6"},
		{[]string{"--num-distributed-optimizer-instances", "2", "--data-parallel-size", "2"}, "needs use_distributed_optimizer = true"},
		{[]string{"--pipeline-rank", "2", "--pipeline-model-parallel-size", "2"}, "--pipeline-rank 2: the pipeline ranks are 0 to 1"},
		{[]string{"--world-size", "8", "--data-parallel-size", "2"}, "--data-parallel-size 2 disagrees with --world-size 8"},
		{[]string{"--world-size", "7", "--tensor-model-parallel-size", "2"}, "world_size 7 is not divisible"},
		{[]string{"--data-parallel-size", "0"}, "--data-parallel-size 0: must be at least 1"},
		{[]string{"--tensor-model-parallel-size", "3"}, "num_attention_heads 4 is not divisible by tensor_model_parallel_size 3"},
	} {
		out, err := run(t, append(base, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
			continue
		}
		if out != "" || strings.Contains(err.Error(), "goroutine") || strings.Contains(err.Error(), "panic") {
			t.Errorf("%v: output %q, error %v: want one plain error", tc.args, out, err)
		}
	}
}
