package plan_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/plan"
	"github.com/gotron/gotron/train"
)

// gpt7B is a 7B-parameter GPT (h 4096, 32 heads, 32 layers, s 2048) in
// bf16 with sequence parallelism, as a planner's user would give it.
func gpt7B(tp, pp, batch int) train.Args {
	a := train.DefaultArgs()
	m := &a.Model
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads, m.SeqLength, m.VocabSize = 32, 4096, 32, 2048, 51200
	m.MaxPositionEmbeddings = 2048
	m.TensorModelParallelSize, m.PipelineModelParallelSize, m.SequenceParallel = tp, pp, tp > 1
	m.BF16 = true
	a.MicroBatchSize, a.GlobalBatchSize = 1, batch
	return a
}

// predict plans a on world devices of the shipped a100-80gb.
func predict(t *testing.T, a train.Args, world int) *plan.Prediction {
	t.Helper()
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	r, err := train.PlanRun(a, world)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Predict(context.Background(), r, world, hw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPredictPartsSum: the iteration is the sum of its parts, and the
// speed its tokens over it.
func TestPredictPartsSum(t *testing.T) {
	a := gpt7B(2, 4, 64)
	a.DDP.UseDistributedOptimizer = true
	p := predict(t, a, 16)
	s := p.Time
	sum := s.Compute + s.TPComm + s.CPComm + s.EPComm + s.Bubble + s.DPComm + s.EmbeddingSync + s.Optimizer
	if math.Abs(sum-p.IterationSeconds) > 1e-9*p.IterationSeconds {
		t.Errorf("parts %+v sum to %g s, the iteration is %g s", s, sum, p.IterationSeconds)
	}
	if want := 64 * 2048 / p.IterationSeconds; math.Abs(p.TokensPerSecond-want) > 1e-9*want {
		t.Errorf("%g tokens/s, want %g", p.TokensPerSecond, want)
	}
	if p.DP != 2 || p.Microbatches != 32 || len(p.Ranks) != 4 {
		t.Errorf("DP %d, %d micro-batches, %d ranks; want 2, 32, 4", p.DP, p.Microbatches, len(p.Ranks))
	}
	for _, v := range []float64{s.TPComm, s.Bubble, s.DPComm, s.EmbeddingSync, s.Optimizer} {
		if !(v > 0) {
			t.Errorf("a part of %+v is not positive: TP 2, PP 4 and DP 2 each cost time", s)
			break
		}
	}
}

// TestPredictSchedules: at the same run, ZB-H1 and the interleaved
// schedule leave less bubble than 1F1B, and ZB-H1 holds 1F1B's
// activations while ZB-H2 holds more.
func TestPredictSchedules(t *testing.T) {
	base := gpt7B(1, 4, 16)
	one := predict(t, base, 4)
	zb := base
	zb.PipelineSchedule = "zb-h1"
	h1 := predict(t, zb, 4)
	zb.PipelineSchedule = "zb-h2"
	h2 := predict(t, zb, 4)
	vpp := base
	vpp.Model.VirtualPipelineModelParallelSize = 2
	inter := predict(t, vpp, 4)
	if !(h1.Time.Bubble < one.Time.Bubble/2) || !(inter.Time.Bubble < one.Time.Bubble) || !(h2.Time.Bubble < h1.Time.Bubble) {
		t.Errorf("bubbles: 1F1B %.3g s, ZB-H1 %.3g, ZB-H2 %.3g, interleaved %.3g: want ZB-H2 < ZB-H1 < 1F1B/2, interleaved < 1F1B",
			one.Time.Bubble, h1.Time.Bubble, h2.Time.Bubble, inter.Time.Bubble)
	}
	if a, b := h1.Ranks[0].Memory.Activations, one.Ranks[0].Memory.Activations; a != b {
		t.Errorf("ZB-H1's first rank keeps %g bytes of activations, 1F1B's %g: want equal", a, b)
	}
	if a, b := h2.Ranks[0].Memory.Activations, one.Ranks[0].Memory.Activations; !(a > b) {
		t.Errorf("ZB-H2's first rank keeps %g bytes of activations, 1F1B's %g: want more", a, b)
	}
}

// TestPredictDataParallel: two data-parallel replicas at the same global
// batch halve each rank's compute; the distributed optimizer divides the
// optimizer state by the replicas; overlapping the reduction with
// backward exposes less of it.
func TestPredictDataParallel(t *testing.T) {
	one := predict(t, gpt7B(8, 1, 8), 8)
	two := predict(t, gpt7B(8, 1, 8), 16)
	if r := two.Time.Compute / one.Time.Compute; math.Abs(r-0.5) > 1e-9 {
		t.Errorf("DP 2's compute is %.4f of DP 1's, want 0.5", r)
	}
	dist := gpt7B(8, 1, 8)
	dist.DDP.UseDistributedOptimizer = true
	d := predict(t, dist, 16)
	if r := d.Ranks[0].Memory.Optimizer / two.Ranks[0].Memory.Optimizer; math.Abs(r-0.5) > 1e-12 {
		t.Errorf("the distributed optimizer keeps %.4f of the optimizer state over DP 2, want 0.5", r)
	}
	over := dist
	over.DDP.OverlapGradReduce, over.DDP.OverlapParamGather = true, true
	o := predict(t, over, 16)
	if !(o.Time.DPComm < d.Time.DPComm) || !(d.Time.DPComm > 0) {
		t.Errorf("exposed DP communication: %.3g s overlapped, %.3g s not: want less, and some", o.Time.DPComm, d.Time.DPComm)
	}
}

// TestPredictRecomputeAndMemory: full recompute costs compute and saves
// activations; a model too large for its devices is said not to fit.
func TestPredictRecomputeAndMemory(t *testing.T) {
	plain := predict(t, gpt7B(2, 1, 4), 2)
	full := gpt7B(2, 1, 4)
	full.Model.RecomputeGranularity, full.Model.RecomputeMethod, full.Model.RecomputeNumLayers = "full", "uniform", 1
	f := predict(t, full, 2)
	if !(f.Time.Compute > 1.2*plain.Time.Compute) || !(f.Ranks[0].Memory.Activations < plain.Ranks[0].Memory.Activations/5) {
		t.Errorf("full recompute: compute %.3g s against %.3g, activations %.3g GiB against %.3g: want about a third more compute, far fewer activations",
			f.Time.Compute, plain.Time.Compute, f.Ranks[0].Memory.Activations/(1<<30), plain.Ranks[0].Memory.Activations/(1<<30))
	}
	if !plain.Ranks[0].Fits {
		t.Errorf("7B on TP 2 needs %.1f GiB a device: it should fit in 80", plain.Ranks[0].MemoryBytes/(1<<30))
	}
	if one := predict(t, gpt7B(1, 1, 1), 1); one.Ranks[0].Fits {
		t.Errorf("7B with Adam on one device needs %.1f GiB: it cannot fit in 80", one.Ranks[0].MemoryBytes/(1<<30))
	}
}

// TestPredictContextParallel: CP 2 splits each sequence, so a rank's
// compute is about half of one rank's and its communication is some.
func TestPredictContextParallel(t *testing.T) {
	one := predict(t, gpt7B(1, 1, 1), 1)
	cp := gpt7B(1, 1, 1)
	cp.Model.ContextParallelSize = 2
	two := predict(t, cp, 2)
	if r := two.Time.Compute / one.Time.Compute; r < 0.45 || r > 0.6 {
		t.Errorf("CP 2's compute is %.3f of one rank's, want about half", r)
	}
	// The gradients are reduced, and the distributed optimizer's state
	// sharded, over the data- and context-parallel ranks.
	cp.GlobalBatchSize, cp.DDP.UseDistributedOptimizer = 2, true
	four := predict(t, cp, 4)
	if four.DP != 2 || !(four.Time.DPComm > 0) {
		t.Errorf("CP 2 × DP 2: DP %d, exposed DP communication %g s; want 2 and some", four.DP, four.Time.DPComm)
	}
	r := four.Ranks[0]
	if got, want := r.Memory.Optimizer/r.Memory.Weights, 12.0/2/4; math.Abs(got-want) > 1e-12 {
		t.Errorf("CP 2 × DP 2 with the distributed optimizer: optimizer state %g of the bf16 weights' bytes, want 12/2/4", got)
	}
}

// TestPredictRefuses: what the planner does not model is refused, named.
func TestPredictRefuses(t *testing.T) {
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	a := gpt7B(1, 1, 4)
	a.Model.ContextParallelSize, a.Model.CPCommType = 2, []string{"a2a"}
	r, err := train.PlanRun(a, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Predict(context.Background(), r, 2, hw); err == nil || !strings.Contains(err.Error(), "--cp-comm-type a2a") {
		t.Errorf("all-to-all context parallelism: %v; want a refusal naming it", err)
	}
}

// TestPredictFSDP: Megatron-FSDP's optim_grads_params keeps a fraction of
// the weights and gradients the distributed optimizer keeps whole, and
// pays with layer-by-layer gathers and reductions every micro-batch.
func TestPredictFSDP(t *testing.T) {
	dist := gpt7B(1, 1, 64)
	dist.DDP.UseDistributedOptimizer = true
	d := predict(t, dist, 16)
	z3 := gpt7B(1, 1, 64)
	z3.DDP.UseMegatronFSDP, z3.DDP.DataParallelShardingStrategy = true, "optim_grads_params"
	f := predict(t, z3, 16)
	z2 := z3
	z2.DDP.DataParallelShardingStrategy = "optim_grads"
	g := predict(t, z2, 16)
	rd, rf, rg := d.Ranks[0].Memory, f.Ranks[0].Memory, g.Ranks[0].Memory
	if !(rf.Weights < rd.Weights/4) || !(rf.Gradients < rd.Gradients/4) || rg.Weights != rd.Weights || !(rg.Gradients < rd.Gradients/4) {
		t.Errorf("weights and gradients, GiB: distributed optimizer %.2f, %.2f; ZeRO-2 %.2f, %.2f; ZeRO-3 %.2f, %.2f: want ZeRO-2's weights whole, the other shards far smaller",
			rd.Weights/(1<<30), rd.Gradients/(1<<30), rg.Weights/(1<<30), rg.Gradients/(1<<30), rf.Weights/(1<<30), rf.Gradients/(1<<30))
	}
	// Overlapped layer by layer, ZeRO-3 hides its communication on fast
	// links, where the distributed optimizer's reduction at the end of
	// the pipeline is exposed; on a slow link it moves six times the
	// bytes (a gather forward and backward, a reduction, every one of 4
	// micro-batches, against one reduction and one gather) and cannot.
	if !(f.Time.DPComm < d.Time.DPComm) {
		t.Errorf("exposed DP communication on A100s: ZeRO-3 %.3g s, the distributed optimizer %.3g s: want less, overlapped", f.Time.DPComm, d.Time.DPComm)
	}
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	hw.InterNode.BusBandwidthGBs = 0.5
	slow := func(a train.Args) float64 {
		r, err := train.PlanRun(a, 16)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Predict(context.Background(), r, 16, hw)
		if err != nil {
			t.Fatal(err)
		}
		return p.Time.DPComm
	}
	if fs, ds := slow(z3), slow(dist); !(fs > 4*ds) {
		t.Errorf("exposed DP communication on 0.5 GB/s: ZeRO-3 %.3g s, the distributed optimizer %.3g s: want about 6 times", fs, ds)
	}
}

// TestPredictMLAAndMTP: multi-latent attention's projections and the MTP
// depths cost time and memory.
func TestPredictMLAAndMTP(t *testing.T) {
	base := mixtral(1, 8, "alltoall")
	m := &base.Model
	m.NumQueryGroups = 0
	m.MultiLatentAttention, m.QKLayernorm = true, true
	m.MLA.QLoRARank, m.MLA.KVLoRARank, m.MLA.QKHeadDim, m.MLA.QKPosEmbHeadDim, m.MLA.VHeadDim = 1536, 512, 128, 64, 128
	mla := predict(t, base, 64)
	mtp := base
	mtp.Model.MTPNumLayers = 1
	with := predict(t, mtp, 64)
	if !(with.Time.Compute > mla.Time.Compute) || !(with.Ranks[0].Memory.Activations > mla.Ranks[0].Memory.Activations) ||
		!(with.Ranks[0].Memory.Weights > mla.Ranks[0].Memory.Weights) {
		t.Errorf("an MTP depth: compute %.3g s against %.3g, activations %.3g GiB against %.3g, weights %.3g against %.3g: want more of each",
			with.Time.Compute, mla.Time.Compute, with.Ranks[0].Memory.Activations/(1<<30), mla.Ranks[0].Memory.Activations/(1<<30),
			with.Ranks[0].Memory.Weights/(1<<30), mla.Ranks[0].Memory.Weights/(1<<30))
	}
	if !(mla.PeakFraction > 0.1 && mla.PeakFraction < 0.9) {
		t.Errorf("MLA: %.1f%% of the peak", 100*mla.PeakFraction)
	}
	noQ := base
	noQ.Model.MLA.QLoRARank = 0
	if q := predict(t, noQ, 64); q.Time.Compute == mla.Time.Compute {
		t.Errorf("MLA with and without a query latent: the same compute, %g s", q.Time.Compute)
	}
}

// mixtral is a Mixtral-8x7B-shaped MoE GPT (h 4096, 32 heads, 8 groups,
// 32 layers of 8 SwiGLU experts of width 14336, 2 a token, s 4096) in bf16
// on tp·ep… of 64 devices with the distributed optimizer.
func mixtral(tp, ep int, dispatcher string) train.Args {
	a := gpt7B(tp, 1, 256)
	m := &a.Model
	m.SeqLength, m.MaxPositionEmbeddings, m.VocabSize = 4096, 4096, 32000
	m.Normalization, m.ActivationFunc, m.GatedLinearUnit, m.PositionEmbeddingType = "RMSNorm", "silu", true, "rope"
	m.NumQueryGroups, m.ShareEmbeddingsAndOutputWeights, m.AddBiasLinear = 8, false, false
	m.NumMoEExperts, m.MoERouterTopK, m.MoEFFNHiddenSize, m.FFNHiddenSize = 8, 2, 14336, 14336
	m.ExpertModelParallelSize, m.MoETokenDispatcherType, m.MoEGroupedGEMM = ep, dispatcher, true
	a.DDP.UseDistributedOptimizer = true
	return a
}

// TestPredictExperts: a MoE model's routed experts are split over the
// expert-parallel ranks, its tokens cross them, and its active FLOPs set
// the model FLOPs.
func TestPredictExperts(t *testing.T) {
	one := predict(t, mixtral(1, 1, "alltoall"), 64)
	eight := predict(t, mixtral(1, 8, "alltoall"), 64)
	if !(eight.Ranks[0].Memory.Weights < one.Ranks[0].Memory.Weights/5) {
		t.Errorf("EP 8 keeps %.1f GiB of weights a device, EP 1 %.1f: the experts, most of the model, should split 8 ways",
			eight.Ranks[0].Memory.Weights/(1<<30), one.Ranks[0].Memory.Weights/(1<<30))
	}
	if one.Time.EPComm != 0 || !(eight.Time.EPComm > 0) || eight.Time.TPComm != 0 {
		t.Errorf("exposed EP communication: EP 1 %g s, EP 8 %g s (TP %g); want none, some (and no TP)", one.Time.EPComm, eight.Time.EPComm, eight.Time.TPComm)
	}
	gather := predict(t, mixtral(2, 4, "allgather"), 64)
	for _, p := range []*plan.Prediction{one, eight, gather} {
		if !(p.PeakFraction > 0.1 && p.PeakFraction < 0.9) {
			t.Errorf("%.1f%% of the peak: want a plausible fraction", 100*p.PeakFraction)
		}
	}
}

// BenchmarkPredict3072 plans 3,072 A100s: TP 8 × PP 16 (VPP 2) × DP 24 of
// a 175B-parameter GPT, 512 micro-batches a data-parallel rank.
func BenchmarkPredict3072(b *testing.B) {
	a := gpt7B(8, 16, 24*512)
	m := &a.Model
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads, m.VirtualPipelineModelParallelSize = 96, 12288, 96, 2
	a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce = true, true
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		b.Fatal(err)
	}
	r, err := train.PlanRun(a, 3072)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := plan.Predict(context.Background(), r, 3072, hw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSearch: the layouts of 16 devices for the 7B model are tried, those
// gotron can train and that fit are ranked fastest first, and each of
// the others carries its reason.
func TestSearch(t *testing.T) {
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	base := gpt7B(1, 1, 64)
	layouts := plan.Layouts(base.Model, 16, 64, hw)
	seen := map[string]bool{}
	for _, l := range layouts {
		if l.TP*l.CP*l.PP > 16 || 16%(l.TP*l.CP*l.PP) != 0 || l.TP > 8 || l.CP != 1 || 64%(l.MicroBatch*16/(l.TP*l.PP)) != 0 {
			t.Errorf("layout %v of 16 devices, a batch of 64 and s 2048", l)
		}
		seen[l.String()] = true
	}
	for _, want := range []string{"TP 8+SP × PP 2, micro-batch 1", "TP 1 × PP 16, micro-batch 4, full recompute", "TP 2+SP × PP 4 (VPP 2), micro-batch 2, selective recompute"} {
		if !seen[want] {
			t.Errorf("the layouts lack %q", want)
		}
	}
	tried, err := plan.Search(context.Background(), layouts, 16, hw, 40*(1<<30), func(l plan.Layout) (plan.Run, error) {
		return train.PlanRun(base.WithLayout(l), 16)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tried) != len(layouts) {
		t.Fatalf("%d tried of %d layouts", len(tried), len(layouts))
	}
	fits, rejected := 0, 0
	for i, tr := range tried {
		switch {
		case tr.Prediction != nil:
			if rejected > 0 {
				t.Errorf("%s fits but follows a rejected layout", tr.Name)
			}
			if i > 0 && tried[i-1].Prediction.TokensPerSecond < tr.Prediction.TokensPerSecond {
				t.Errorf("%s (%g tokens/s) ranks after a slower layout", tr.Name, tr.Prediction.TokensPerSecond)
			}
			if tr.Prediction.Max().MemoryBytes > 40*(1<<30) {
				t.Errorf("%s needs %.1f GiB, beyond the 40 GiB limit", tr.Name, tr.Prediction.Max().MemoryBytes/(1<<30))
			}
			fits++
		case tr.Rejected == "":
			t.Errorf("%s was rejected without a reason", tr.Name)
		default:
			rejected++
		}
	}
	if fits == 0 || rejected == 0 {
		t.Errorf("%d layouts fit, %d rejected: want some of each (TP 1 × PP 1 cannot hold 7B in 40 GiB)", fits, rejected)
	}
}

// TestLayoutsSchedulesAndExperts: the layouts try the zero-bubble
// schedules where their pipelines allow them (ZB-H1 and ZB-H2 without
// virtual stages, ZB-V and DualPipeV at two) and, for a MoE model, every
// expert-parallel size that divides its experts and a stage's devices over
// the expert tensor-parallel size; a dense model has EP 1. A layout
// carries its schedule and EP into the run.
func TestLayoutsSchedulesAndExperts(t *testing.T) {
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	schedules := map[string]map[string]bool{}
	for _, l := range plan.Layouts(gpt7B(1, 1, 64).Model, 16, 64, hw) {
		key := fmt.Sprintf("PP>1 %v, VPP %d", l.PP > 1, l.VPP)
		if schedules[key] == nil {
			schedules[key] = map[string]bool{}
		}
		schedules[key][l.Schedule] = true
		if l.EP != 1 {
			t.Errorf("dense layout %v: EP %d, want 1", l, l.EP)
		}
	}
	for key, want := range map[string][]string{"PP>1 false, VPP 0": {""}, "PP>1 true, VPP 0": {"", "zb-h1", "zb-h2"},
		"PP>1 true, VPP 2": {"", "dualpipev", "zb-v"}, "PP>1 true, VPP 4": {""}} {
		if got := slices.Sorted(maps.Keys(schedules[key])); !slices.Equal(got, want) {
			t.Errorf("%s: schedules %q, want %q", key, got, want)
		}
	}
	moe := mixtral(1, 1, "alltoall")
	eps := map[[2]int][]int{}
	for _, l := range plan.Layouts(moe.Model, 16, 64, hw) {
		k := [2]int{l.TP, l.PP}
		if !slices.Contains(eps[k], l.EP) {
			eps[k] = append(eps[k], l.EP)
		}
	}
	for k, want := range map[[2]int][]int{{1, 1}: {1, 2, 4, 8}, {2, 2}: {1, 2, 4}, {8, 2}: {1}, {4, 4}: {1}} {
		if got := eps[k]; !slices.Equal(got, want) {
			t.Errorf("8 experts on 16 devices, TP %d × PP %d: EP %v, want %v", k[0], k[1], got, want)
		}
	}
	l := plan.Layout{TP: 2, CP: 1, PP: 2, VPP: 2, EP: 4, MicroBatch: 1, Schedule: "zb-v"}
	a := moe.WithLayout(l)
	if a.Model.ExpertModelParallelSize != 4 || a.PipelineSchedule != "zb-v" || a.MicroBatchSize != 1 {
		t.Errorf("%v applied: EP %d, schedule %q, micro-batch %d", l, a.Model.ExpertModelParallelSize, a.PipelineSchedule, a.MicroBatchSize)
	}
	if p := predict(t, a, 16); p.Schedule != "zb-v" {
		t.Errorf("%v planned with schedule %q", l, p.Schedule)
	}
}

// BenchmarkSearch1536 searches the layouts of 1,536 A100s for the 175B
// GPT of Narayanan et al. 2021 (global batch 1536).
func BenchmarkSearch1536(b *testing.B) {
	a := gpt7B(1, 1, 1536)
	a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads = 96, 12288, 96
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_, _ = plan.Search(context.Background(), plan.Layouts(a.Model, 1536, 1536, hw), 1536, hw, 80*(1<<30), func(l plan.Layout) (plan.Run, error) {
			return train.PlanRun(a.WithLayout(l), 1536)
		})
	}
}

// TestPredictBounds: a cancelled plan stops with its context's error, and
// a plan too large to play is refused naming the fix.
func TestPredictBounds(t *testing.T) {
	hw, err := plan.LoadHardware("a100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	r, err := train.PlanRun(gpt7B(1, 4, 1<<20), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Predict(context.Background(), r, 4, hw); err == nil || !strings.Contains(err.Error(), "smaller --global-batch-size") {
		t.Errorf("2²⁰ micro-batches on 4 stages: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err = train.PlanRun(gpt7B(1, 4, 16), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Predict(ctx, r, 4, hw); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled plan: %v", err)
	}
	layouts := plan.Layouts(r.Model, 4, 16, hw)
	if _, err := plan.Search(ctx, layouts, 4, hw, 1<<40, func(plan.Layout) (plan.Run, error) { return r, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled search: %v", err)
	}
}

// TestPredictExpertDetails: the all-gather dispatcher exchanges over the
// etp·ep group (nothing without expert ranks), shared experts cost
// compute, and the routed experts' gradients are reduced over the expert
// data-parallel group.
func TestPredictExpertDetails(t *testing.T) {
	gather := mixtral(2, 1, "allgather")
	gather.Model.SequenceParallel, gather.Model.ExpertTensorParallelSize = true, 1
	if p := predict(t, gather, 64); p.Time.EPComm != 0 {
		t.Errorf("the all-gather dispatcher with ep = etp = 1 under TP 2: %g s of EP communication, want none", p.Time.EPComm)
	}
	gather.Model.ExpertModelParallelSize = 2
	if p := predict(t, gather, 64); !(p.Time.EPComm > 0) {
		t.Errorf("the all-gather dispatcher over EP 2: no EP communication")
	}
	plain := predict(t, mixtral(1, 8, "alltoall"), 64)
	shared := mixtral(1, 8, "alltoall")
	shared.Model.MoESharedExpertIntermediateSize = 14336
	if s := predict(t, shared, 64); !(s.Time.Compute > plain.Time.Compute) {
		t.Errorf("a shared expert: compute %g s, %g without", s.Time.Compute, plain.Time.Compute)
	}
	more := mixtral(1, 8, "alltoall")
	more.Model.NumMoEExperts = 16
	if m := predict(t, more, 64); !(m.Time.DPComm > plain.Time.DPComm) {
		t.Errorf("twice the experts a rank: exposed DP communication %g s, %g with half: want more, the experts' gradients reduced", m.Time.DPComm, plain.Time.DPComm)
	}
}

// TestPredictMTPStandalone: with the MTP depth on a stage of its own, the
// loss stage runs the depth's output layer and loss, so it is busier than
// the depth's stage.
func TestPredictMTPStandalone(t *testing.T) {
	a := gpt7B(1, 4, 16)
	m := &a.Model
	m.NumLayers, m.VocabSize, m.PositionEmbeddingType, m.MTPNumLayers = 4, 128000, "rope", 1
	m.PipelineModelParallelLayout = "Ett|tt|m|L"
	p := predict(t, a, 4)
	if !(p.Ranks[3].BusySeconds > 1.5*p.Ranks[2].BusySeconds) {
		t.Errorf("busy: the MTP stage %.3g s, the loss stage %.3g s: want the loss stage's two heads to dominate", p.Ranks[2].BusySeconds, p.Ranks[3].BusySeconds)
	}
}
