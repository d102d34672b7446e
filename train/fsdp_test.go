package train

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
)

// fsdpArgs is ppArgs(world, 1, 1) under Megatron-FSDP with strategy.
func fsdpArgs(world int, strategy string) Args { return fsdpLayout(world, 1, 1, strategy) }

// fsdpLayout is ppArgs(world, tp, pipe) under Megatron-FSDP with strategy.
func fsdpLayout(world, tp, pipe int, strategy string) Args {
	a := ppArgs(world, tp, pipe)
	a.DDP.UseMegatronFSDP, a.DDP.DataParallelShardingStrategy = true, strategy
	return a
}

// TestMegatronFSDPMatchesSingleRank is Megatron-FSDP's layout-equivalence
// test: every strategy on DP 2, ZeRO-3 on DP 4, hybrid sharding (HSDP and
// HFSDP: 2 instances of DP 2, also beside TP 2), PP 2 (with DP 2, virtual
// stages, ZB-H1, and TP 2 × SP on 8 ranks), TP 2 × DP 2 (with sequence
// parallelism, and with Llama-class options whose q/k layer norms are
// summed over TP), with full recompute, with
// the smallest and the largest prefetch, averaging in the collective, the
// per-token loss, and with 4 micro-batches of gradient accumulation per
// rank: the 20-step loss curve and the final validation loss equal the
// one-rank ones to 1e-6 relative, and the first step's gradients,
// gathered from the shards to whole tensors, to 1e-5.
func TestMegatronFSDPMatchesSingleRank(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, ppArgs(1, 1, 1))
	for _, l := range []struct {
		name string
		set  func(a *Args)
	}{
		{"dp2-optim", func(a *Args) { *a = fsdpArgs(2, config.ShardOptim) }},
		{"dp2-optim_grads", func(a *Args) { *a = fsdpArgs(2, config.ShardOptimGrads) }},
		{"dp2-optim_grads_params", func(a *Args) { *a = fsdpArgs(2, config.ShardOptimGradsParams) }},
		{"dp4-optim_grads_params", func(a *Args) { *a = fsdpArgs(4, config.ShardOptimGradsParams) }},
		{"dp2-zero3-full-recompute", func(a *Args) {
			*a = fsdpArgs(2, config.ShardOptimGradsParams)
			a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "block", 2
		}},
		{"dp2-zero3-selective-recompute", func(a *Args) {
			*a = fsdpArgs(2, config.ShardOptimGradsParams)
			a.Model.RecomputeGranularity = "selective"
		}},
		{"dp2-zero3-unit-1-element", func(a *Args) {
			*a = fsdpArgs(2, config.ShardOptimGradsParams)
			a.DDP.SuggestedCommunicationUnitSize = 1
		}},
		{"dp2-zero3-unit-everything", func(a *Args) {
			*a = fsdpArgs(2, config.ShardOptimGradsParams)
			a.DDP.SuggestedCommunicationUnitSize = 1 << 30
		}},
		{"dp2-zero3-average-in-collective", func(a *Args) {
			*a = fsdpArgs(2, config.ShardOptimGradsParams)
			a.DDP.AverageInCollective = true
		}},
		{"tp2-sp-dp2-zero3", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
		}},
		{"tp2-dp2-zero2-selective-recompute", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGrads)
			a.Model.TensorModelParallelSize, a.Model.RecomputeGranularity = 2, "selective"
		}},
		{"pp2-zero2", func(a *Args) { *a = fsdpLayout(2, 1, 2, config.ShardOptimGrads) }},
		{"pp2-dp2-zero3", func(a *Args) { *a = fsdpLayout(4, 1, 2, config.ShardOptimGradsParams) }},
		{"pp2-vpp2-dp2-zero3", func(a *Args) {
			*a = fsdpLayout(4, 1, 2, config.ShardOptimGradsParams)
			a.Model.VirtualPipelineModelParallelSize = 2
		}},
		{"pp2-dp2-zero3-zb-h1", func(a *Args) {
			*a = fsdpLayout(4, 1, 2, config.ShardOptimGradsParams)
			a.PipelineSchedule = pp.ScheduleZBH1
		}},
		{"pp2-dp2-zero3-zb-h2", func(a *Args) {
			*a = fsdpLayout(4, 1, 2, config.ShardOptimGradsParams)
			a.PipelineSchedule = pp.ScheduleZBH2
		}},
		{"tp2-sp-pp2-dp2-zero3", func(a *Args) {
			*a = fsdpLayout(8, 2, 2, config.ShardOptimGradsParams)
			a.Model.SequenceParallel = true
		}},
		{"dp4-hsdp-2-instances-zero3", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances = 2
		}},
		{"dp4-hsdp-2-instances-zero2-average-in-collective", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGrads)
			a.DDP.NumDistributedOptimizerInstances, a.DDP.AverageInCollective = 2, true
		}},
		{"dp4-hfsdp-2-instances", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances, a.DDP.OuterDPShardingStrategy = 2, config.ShardOptim
		}},
		{"tp2-dp4-hfsdp-2-instances", func(a *Args) {
			*a = fsdpLayout(8, 2, 1, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances, a.DDP.OuterDPShardingStrategy = 2, config.ShardOptim
		}},
		{"tp2-dp4-hsdp-2-instances-zero3", func(a *Args) {
			*a = fsdpLayout(8, 2, 1, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances = 2
		}},
		{"dp2-zero2-grad-reduce-in-fp32", func(a *Args) {
			*a = fsdpArgs(2, config.ShardOptimGrads)
			a.DDP.GradReduceInFP32 = true
		}},
	} {
		t.Run(l.name, func(t *testing.T) {
			var a Args
			l.set(&a)
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
	// Against the one-rank run of the same model and batch: 4
	// micro-batches of accumulation per rank on DP 2, with the per-token
	// loss; and Llama-class options (RMSNorm, SwiGLU, q/k layer norms
	// summed over TP) on TP 2 × DP 2 with sequence parallelism.
	for _, l := range []struct {
		name  string
		world int
		set   func(a *Args)
	}{
		{"accumulate-4", 2, func(a *Args) { a.GlobalBatchSize = 16 }},
		{"accumulate-4-per-token-loss", 2, func(a *Args) { a.GlobalBatchSize, a.Model.CalculatePerTokenLoss = 16, true }},
		{"tp2-sp-dp2-llama-options", 4, func(a *Args) {
			a.Model.QKLayernorm, a.Model.GatedLinearUnit, a.Model.Normalization = true, true, "RMSNorm"
			if a.WorldSize > 1 {
				a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
			}
		}},
	} {
		t.Run(l.name, func(t *testing.T) {
			one := ppArgs(1, 1, 1)
			l.set(&one)
			wantLoss, wantGrads := tpRun(t, one)
			for _, s := range []string{config.ShardOptimGrads, config.ShardOptimGradsParams} {
				a := fsdpArgs(l.world, s)
				l.set(&a)
				losses, grads := tpRun(t, a)
				checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
			}
		})
	}
}

// TestMegatronFSDPContextParallel: the sharded strategies over the
// data- and context-parallel ranks — CP 2 alone (the state sharded over
// the two context-parallel ranks), CP 2 × DP 2, and CP 2 × TP 2 with
// sequence parallelism — equal one rank to 1e-6 (losses) and 1e-5
// (gradients).
func TestMegatronFSDPContextParallel(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, cpLayout{world: 1, cp: 1}.args())
	for _, c := range []struct {
		l        cpLayout
		strategy string
	}{
		{cpLayout{world: 2, cp: 2, comm: "p2p"}, config.ShardOptimGradsParams},
		{cpLayout{world: 4, cp: 2, comm: "p2p"}, config.ShardOptimGradsParams},
		{cpLayout{world: 4, cp: 2, comm: "a2a"}, config.ShardOptimGrads},
		{cpLayout{world: 4, cp: 2, tp: 2, comm: "p2p", sp: true}, config.ShardOptimGradsParams},
	} {
		t.Run(c.l.String()+"-"+c.strategy, func(t *testing.T) {
			a := c.l.args()
			a.DDP.UseMegatronFSDP, a.DDP.DataParallelShardingStrategy = true, c.strategy
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}

// TestMegatronFSDPMoE: a MoE model's experts sharded over the expert
// data-parallel ranks (averaged over the dense replicas), under ZeRO-2
// and ZeRO-3 — DP 2, EP 2, EP 2 × DP 2 (both dispatchers, grouped
// experts, and averaging in the collective), EP 2 × ETP 2, EP 2 × TP 2
// with SP, EP 2 × PP 2 — equals one rank to 1e-6 (losses) and 1e-5
// (gradients).
func TestMegatronFSDPMoE(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, moeArgs(1))
	for _, l := range []moeLayout{
		{world: 2}, {world: 2, ep: 2}, {world: 4, ep: 2, dispatcher: "alltoall"},
		{world: 4, ep: 2, grouped: true}, {world: 4, ep: 2, etp: 2},
		{world: 4, tp: 2, sp: true, ep: 2}, {world: 4, ep: 2, pp: 2, dispatcher: "alltoall"},
	} {
		for _, s := range []string{config.ShardOptimGrads, config.ShardOptimGradsParams} {
			t.Run(l.String()+"-"+s, func(t *testing.T) {
				a := l.args()
				a.DDP.UseMegatronFSDP, a.DDP.DataParallelShardingStrategy = true, s
				losses, grads := tpRun(t, a)
				checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
			})
		}
	}
	t.Run("ep2-dp2-zero3-average-in-collective", func(t *testing.T) {
		a := moeLayout{world: 4, ep: 2}.args()
		a.DDP.UseMegatronFSDP, a.DDP.DataParallelShardingStrategy, a.DDP.AverageInCollective = true, config.ShardOptimGradsParams, true
		losses, grads := tpRun(t, a)
		checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
	})
}

// TestMegatronFSDPMixedPrecision: bf16 under ZeRO-2 and ZeRO-3 on DP 2
// follows the one-rank bf16 run as the distributed optimizer does
// (TestMixedPrecisionLayouts' 1e-4: the 16-bit parameters round the last
// bits the reduction order moves), fp16 with a constant loss scale to
// 1e-3.
func TestMegatronFSDPMixedPrecision(t *testing.T) {
	for _, p := range []struct {
		name string
		set  func(a *Args)
		tol  float64
	}{
		{"bf16", func(a *Args) { a.Model.BF16 = true }, 1e-4},
		{"bf16-grads-bf16", func(a *Args) { a.Model.BF16, a.GradReduceInBF16 = true, true }, 1e-3},
		{"fp16-scale-1024", func(a *Args) { a.Model.FP16, a.LossScale = true, 1024 }, 1e-3},
	} {
		one := ppArgs(1, 1, 1)
		p.set(&one)
		want := mustRun(t, one)
		for _, s := range []string{config.ShardOptimGrads, config.ShardOptimGradsParams} {
			t.Run(p.name+"/"+s, func(t *testing.T) {
				a := fsdpArgs(2, s)
				p.set(&a)
				got := mustRun(t, a)
				for i := range want.Losses {
					if e := relErr(got.Losses[i], want.Losses[i]); e > p.tol {
						t.Errorf("step %d: loss %.8f, one rank %.8f (relative %.2g > %g)", i+1, got.Losses[i], want.Losses[i], e, p.tol)
					}
				}
			})
		}
	}
}

// TestMegatronFSDPResume: a ZeRO-3 run on DP 2 saved at iteration 5
// resumes bit for bit under the same layout, and with the uninterrupted
// loss curve to 1e-6 under ZeRO-2 on DP 4, the distributed optimizer on
// DP 2 and one plain rank; one on DP 4 loads under TP 2 × DP 2 with the
// distributed optimizer (1e-5), one plain rank and PP 2 × DP 2 under
// ZeRO-3; a checkpoint of the distributed optimizer loads under ZeRO-3
// likewise. In bf16 the same-layout resume is bit for bit too, and under
// HFSDP (every instance writing its pieces of the optimizer state), which
// also loads under one rank.
func TestMegatronFSDPResume(t *testing.T) {
	zero3 := fsdpArgs(2, config.ShardOptimGradsParams)
	distOpt := ppArgs(2, 1, 1)
	distOpt.DDP.UseDistributedOptimizer = true
	bf16 := zero3
	bf16.Model.BF16 = true
	hfsdp := fsdpArgs(4, config.ShardOptimGradsParams)
	hfsdp.DDP.NumDistributedOptimizerInstances, hfsdp.DDP.OuterDPShardingStrategy = 2, config.ShardOptim
	for _, c := range []struct {
		name  string
		saved Args
		loads []func(b *Args)
		tols  []float64
	}{
		{"zero3", zero3, []func(b *Args){
			func(b *Args) {},
			func(b *Args) { b.WorldSize, b.DDP.DataParallelShardingStrategy = 4, config.ShardOptimGrads },
			func(b *Args) { b.DDP = distOpt.DDP },
			func(b *Args) { b.WorldSize, b.DDP = 1, config.DefaultDDPConfig() },
		}, []float64{0, 1e-6, 1e-6, 1e-6}},
		{"zero3-dp4", fsdpArgs(4, config.ShardOptimGradsParams), []func(b *Args){
			func(b *Args) {
				b.Model.TensorModelParallelSize = 2
				b.DDP = distOpt.DDP
			},
			func(b *Args) { b.WorldSize, b.DDP = 1, config.DefaultDDPConfig() },
			func(b *Args) { b.Model.PipelineModelParallelSize = 2 },
		}, []float64{1e-5, 1e-6, 1e-6}},
		{"distopt-into-zero3", distOpt, []func(b *Args){func(b *Args) { b.DDP = zero3.DDP }}, []float64{1e-6}},
		{"bf16-zero3", bf16, []func(b *Args){func(b *Args) {}}, []float64{0}},
		{"hfsdp", hfsdp, []func(b *Args){
			func(b *Args) {},
			func(b *Args) { b.WorldSize, b.DDP = 1, config.DefaultDDPConfig() },
		}, []float64{0, 1e-6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := c.saved
			a.TrainIters, a.LRDecayIters = 10, 10
			full, dir := runAndSaveAt5(t, a)
			for k, set := range c.loads {
				b := a
				b.Load = dir
				set(&b)
				res := mustRun(t, b)
				for i, loss := range res.Losses {
					if e := relErr(loss, full.Losses[5+i]); e > c.tols[k] {
						t.Errorf("load %d: iteration %d: loss %.9f, uninterrupted %.9f (relative %.2g > %g)", k, 6+i, loss, full.Losses[5+i], e, c.tols[k])
					}
				}
			}
		})
	}
}

// TestMegatronFSDPSample: sampling after ZeRO-3 training, where every
// replica takes part in the layers' gathers, gives the distributed
// optimizer's text.
func TestMegatronFSDPSample(t *testing.T) {
	var texts []string
	for _, a := range []Args{ppArgs(2, 1, 1), fsdpArgs(2, config.ShardOptimGradsParams)} {
		a.Model.VocabSize, a.TrainIters, a.LRWarmupIters, a.Sample = 256, 2, 0, 24
		a.DDP.UseDistributedOptimizer = true
		texts = append(texts, mustRun(t, a).Sample)
	}
	if texts[0] == "" || texts[1] != texts[0] {
		t.Fatalf("ZeRO-3 samples %q, the distributed optimizer %q", texts[1], texts[0])
	}
}

// TestMegatronFSDPRefusals: what gotron's Megatron-FSDP does not combine
// with yet is one clear error before any rank starts, naming the flag.
func TestMegatronFSDPRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(a *Args)
		want string
	}{
		{"align-param-gather", func(a *Args) {
			*a = fsdpLayout(4, 1, 2, config.ShardOptimGradsParams)
			a.Model.VirtualPipelineModelParallelSize = 2
			on := true
			a.AlignParamGather = &on
		}, "--align-param-gather"},
		{"a strategy without FSDP", func(a *Args) {
			*a = ppArgs(2, 1, 1)
			a.DDP.DataParallelShardingStrategy = config.ShardOptimGrads
		}, "use_megatron_fsdp"},
		{"HFSDP without ZeRO-3 inside", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGrads)
			a.DDP.NumDistributedOptimizerInstances, a.DDP.OuterDPShardingStrategy = 2, config.ShardOptim
		}, "optim_grads_params"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a Args
			c.set(&a)
			_, err := Run(context.Background(), a, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
		})
	}
}

// TestMegatronFSDPMemory measures a rank's model state on DP 4 — under
// DDP, the distributed optimizer, ZeRO-2 and ZeRO-3, in float32 and bf16,
// over two iterations of 2 micro-batches — and compares each part with
// the memory model's estimate (plan.Memory, the up-front check's): within
// 5%. ZeRO-3 keeps at most 0.5 of DDP's state (a 6-layer model: the
// embeddings and two layers in flight are whole).
func TestMegatronFSDPMemory(t *testing.T) {
	measured := map[string]int64{}
	for _, c := range []struct {
		name string
		set  func(a *Args)
	}{
		{"ddp", func(a *Args) {}},
		{"distopt", func(a *Args) { a.DDP.UseDistributedOptimizer = true }},
		{"optim_grads", func(a *Args) { *a = fsdpArgs(4, config.ShardOptimGrads) }},
		{"optim_grads_params", func(a *Args) { *a = fsdpArgs(4, config.ShardOptimGradsParams) }},
		{"bf16-optim_grads_params", func(a *Args) { *a = fsdpArgs(4, config.ShardOptimGradsParams); a.Model.BF16 = true }},
		{"tp2-sp-dp2-optim_grads_params", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
		}},
		{"moe-ep2-dp2-optim_grads_params", func(a *Args) {
			*a = moeLayout{world: 4, ep: 2}.args()
			a.DDP.UseMegatronFSDP, a.DDP.DataParallelShardingStrategy = true, config.ShardOptimGradsParams
		}},
		{"moe-ep2-dp2-optim_grads", func(a *Args) {
			*a = moeLayout{world: 4, ep: 2}.args()
			a.DDP.UseMegatronFSDP, a.DDP.DataParallelShardingStrategy = true, config.ShardOptimGrads
		}},
		{"hfsdp-2-instances", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances, a.DDP.OuterDPShardingStrategy = 2, config.ShardOptim
		}},
		{"hfsdp-2-instances-bf16", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances, a.DDP.OuterDPShardingStrategy = 2, config.ShardOptim
			a.Model.BF16 = true
		}},
		{"hsdp-2-instances-optim_grads_params", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.NumDistributedOptimizerInstances = 2
		}},
		{"zero3-unit-1-element", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.SuggestedCommunicationUnitSize = 1
		}},
		{"zero3-unit-4-layers", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.SuggestedCommunicationUnitSize = 200000
		}},
		{"zero3-unit-everything", func(a *Args) {
			*a = fsdpArgs(4, config.ShardOptimGradsParams)
			a.DDP.SuggestedCommunicationUnitSize = 1 << 30
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ppArgs(4, 1, 1)
			c.set(&a)
			a.Model.NumLayers, a.Model.HiddenSize, a.Model.VocabSize = 6, 64, 512
			a.TrainIters, a.LRWarmupIters, a.EvalIters, a.Sample, a.GlobalBatchSize = 2, 0, 0, 0, 16
			p, err := Prepare(a, Options{}, Placement{World: 4, Machine: 4, Process: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var w, g, o int64
			err = local.NewWorld(4, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, grp comm.Group) error {
				r, err := p.NewRank(ctx, grp)
				if err != nil {
					return err
				}
				for r.Iteration() < a.TrainIters {
					if _, err := r.Step(ctx, StepOptions{}); err != nil {
						return err
					}
				}
				if grp.Rank() == 0 {
					w, g, o = r.StateBytes()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			need := estimateMemory(p.Args(), 4, 1)
			for _, x := range []struct {
				what      string
				got, want float64
			}{{"weights", float64(w), need.Weights}, {"gradients", float64(g), need.Gradients}, {"optimizer", float64(o), need.Optimizer}} {
				if e := relErr(x.got, x.want); e > 0.05 {
					t.Errorf("%s: measured %.0f bytes, the memory model says %.0f (relative %.2g > 5%%)", x.what, x.got, x.want, e)
				}
			}
			measured[c.name] = w + g + o
			t.Logf("weights %d, gradients %d, optimizer %d bytes (estimate %.0f, %.0f, %.0f)", w, g, o, need.Weights, need.Gradients, need.Optimizer)
		})
	}
	r := float64(measured["optim_grads_params"]) / float64(measured["ddp"])
	if r > 0.5 {
		t.Errorf("ZeRO-3 holds %.2f of DDP's state, want at most 0.5", r)
	}
	t.Logf("ZeRO-3 holds %.2f of DDP's state per rank", r)
}

// TestMegatronFSDPLayoutAsInspected: the units dp.FSDP builds for every
// chunk of a rank (first and last pipeline stages with the tied
// embedding, Llama-class options, TP 2) are the buckets `gotron inspect
// buckets` prints: gpt.FSDPGroups of the chunk's ChunkParamSpecs laid out
// by dp.FSDPLayout, name for name and element for element.
func TestMegatronFSDPLayoutAsInspected(t *testing.T) {
	llama := fsdpLayout(4, 2, 1, config.ShardOptimGradsParams)
	llama.Model.QKLayernorm, llama.Model.GatedLinearUnit, llama.Model.Normalization = true, true, "RMSNorm"
	for name, a := range map[string]Args{
		"dp2":           fsdpArgs(2, config.ShardOptimGradsParams),
		"pp2-dp2-tied":  fsdpLayout(4, 1, 2, config.ShardOptimGrads),
		"tp2-dp2-llama": llama,
		"pp2-vpp2-dp2": func() Args {
			b := fsdpLayout(4, 1, 2, config.ShardOptimGradsParams)
			b.Model.VirtualPipelineModelParallelSize = 2
			return b
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			a.TrainIters, a.LRWarmupIters, a.EvalIters, a.Sample = 1, 0, 0, 0
			p, err := Prepare(a, Options{}, Placement{World: a.WorldSize, Machine: a.WorldSize, Process: a.WorldSize})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = local.NewWorld(a.WorldSize, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				r, err := p.NewRank(ctx, g)
				if err != nil {
					return err
				}
				m := p.Args().Model
				chunks, err := m.PipelineChunks()
				if err != nil {
					return err
				}
				dpSize := r.t.dpg.Size()
				for v, ch := range chunks[r.t.pp.Rank()] {
					specs, err := gpt.ChunkParamSpecs(m, m.TensorModelParallelSize, gpt.ChunkSpec{PreProcess: ch.PreProcess, PostProcess: ch.PostProcess, LayerOffset: ch.LayerOffset, NumLayers: ch.NumLayers})
					if err != nil {
						return err
					}
					groups, _ := gpt.FSDPGroups(specs)
					lps := make([][]dp.LayoutParam, len(groups))
					for i, gr := range groups {
						for _, s := range gr {
							lps[i] = append(lps[i], dp.LayoutParam{Name: s.Name, Numel: s.Numel()})
						}
					}
					want := dp.FSDPLayout(lps, dpSize, 1, false)
					got := r.t.ddps[v].(*dp.FSDP).Units()
					if len(got) != len(want.Buckets) {
						return fmt.Errorf("rank %d chunk %d: %d units, inspect lays out %d buckets", g.Rank(), v, len(got), len(want.Buckets))
					}
					for k, u := range got {
						bk := want.Buckets[k]
						var names []string
						for _, i := range bk.Params {
							names = append(names, want.Params[i].Name)
						}
						if u.Numel != bk.End-bk.Start || !slices.Equal(u.Params, names) {
							return fmt.Errorf("rank %d chunk %d unit %d: %d elements %v; inspect: %d elements %v", g.Rank(), v, k, u.Numel, u.Params, bk.End-bk.Start, names)
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
