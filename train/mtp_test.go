package train

import (
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/pp"
)

// mtpArgs is llamaArgs with tied embeddings and two multi-token-prediction
// depths weighted 0.3.
func mtpArgs(world int) Args {
	a := llamaArgs(world)
	a.Model.ShareEmbeddingsAndOutputWeights = true
	a.Model.MTPNumLayers, a.Model.MTPLossScalingFactor = 2, 0.3
	return a
}

// mtpRun is tpRun that also returns the MTP depths' logged losses, every
// iteration's in order.
func mtpRun(t *testing.T, a Args) (losses, mtp []float64, grads *safetensors.File) {
	t.Helper()
	res, g := runDumpingGrads(t, a)
	if len(res.MTPLosses) != len(res.Losses) {
		t.Fatalf("%d iterations logged MTP losses of %d", len(res.MTPLosses), len(res.Losses))
	}
	for _, l := range res.MTPLosses {
		mtp = append(mtp, l...)
	}
	return append(res.Losses, res.ValidLoss), mtp, g
}

// TestMTPMatchesSingleRank is the layout-equivalence test of
// multi-token prediction: the 20-step loss curve, the final validation
// loss and every depth's logged loss equal one rank's to 1e-6 relative,
// and the first step's gathered gradients (the depths' among them) to
// 1e-5, under TP 2 with SP, CP 2 (the depths' rolled tokens cross the CP
// ranks), PP 2 and PP 2 × VPP 2 with the depths beside the loss, a layout
// string with m, DP 2 with the distributed optimizer and overlapped
// reduction, full and selective recompute, a standalone MTP stage
// (Ett|tt|mm|L, alone, with TP 2 + SP and with CP 2), an untied model at
// PP 2 and standalone (the depths' stage then holds a copy of the word
// embedding), the reference documentation's three MTP layouts on 8
// layers over PP 4 × VPP 2, and, with MoE layers (the depths' layers then
// MoE too), EP 2 and EP 2 × PP 2.
func TestMTPMatchesSingleRank(t *testing.T) {
	for _, variant := range []struct {
		name    string
		set     func(m *config.TransformerConfig)
		layouts []string
	}{
		{"dense", func(*config.TransformerConfig) {}, []string{"tp2-sp", "cp2", "pp2", "pp2-vpp2", "pp2-layout", "dp2-distopt", "recompute-full", "recompute-selective",
			"pp2-standalone", "pp2-standalone-tp2-sp", "pp2-standalone-cp2", "pp2-standalone-zb-h2", "pp2-standalone-zb-v", "pp2-standalone-dualpipev"}},
		{"untied", func(m *config.TransformerConfig) { m.ShareEmbeddingsAndOutputWeights = false }, []string{"pp2", "pp2-standalone"}},
		{"8-layers", func(m *config.TransformerConfig) { m.NumLayers = 8 }, []string{"doc-E|t*3|(t|)*5mmL", "doc-E|t*3|(t|)*4tmm|L", "doc-E|t*3|(t|)*3tt|mm|L"}},
		{"moe", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoEFFNHiddenSize, m.MoEAuxLossCoeff = 4, 32, 0.01
		}, []string{"ep2", "ep2-pp2"}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			one := mtpArgs(1)
			variant.set(&one.Model)
			wantLoss, wantMTP, wantGrads := mtpRun(t, one)
			for _, name := range []string{"mtp.layers.0.eh_proj.weight", "mtp.layers.1.mtp_model_layer.self_attention.linear_qkv.weight", "mtp.layers.1.final_layernorm.weight"} {
				if _, ok := wantGrads.Get(name); !ok {
					t.Fatalf("no gradient for %s: the MTP depths are not in effect", name)
				}
			}
			for _, name := range variant.layouts {
				t.Run(name, func(t *testing.T) {
					a := mtpLayout(name)
					variant.set(&a.Model)
					losses, mtp, grads := mtpRun(t, a)
					checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
					for i := range wantMTP {
						if e := relErr(mtp[i], wantMTP[i]); e > 1e-6 {
							t.Errorf("iteration %d, depth %d: MTP loss %.9f, one rank %.9f (relative %.2g)", i/2+1, i%2+1, mtp[i], wantMTP[i], e)
						}
					}
				})
			}
		})
	}
}

// mtpLayout is mtpArgs under the layout name of TestMTPMatchesSingleRank.
func mtpLayout(name string) Args {
	var a Args
	switch name {
	case "tp2-sp":
		a = mtpArgs(2)
		a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
	case "cp2":
		a = mtpArgs(2)
		a.Model.ContextParallelSize = 2
	case "pp2", "pp2-vpp2", "pp2-layout":
		a = mtpArgs(2)
		a.Model.PipelineModelParallelSize = 2
		switch name {
		case "pp2-vpp2":
			a.Model.VirtualPipelineModelParallelSize = 2
		case "pp2-layout":
			a.Model.PipelineModelParallelLayout = "Et|t|t|tmmL"
		}
	case "pp2-standalone":
		// Ett|tt|mm|L: the depths on rank 0's second chunk, apart from the
		// loss on rank 1's.
		a = mtpArgs(2)
		a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 2, 2
		a.Model.PipelineModelParallelLayout = "Ett|tt|mm|L"
	case "pp2-standalone-zb-h2":
		// Ettttmm|L: the depths on rank 0 after its layers, the loss alone
		// on rank 1, under ZB-H2 (which posts receives long before their
		// sends: the shapes come from the layout, not an exchange).
		a = mtpArgs(2)
		a.Model.PipelineModelParallelSize, a.Model.PipelineModelParallelLayout = 2, "Ettttmm|L"
		a.PipelineSchedule = pp.ScheduleZBH2
	case "pp2-standalone-zb-v", "pp2-standalone-dualpipev":
		// Ett|tt|mm|L in a V: rank 0 holds the first stage and the loss,
		// rank 1 the second stage and the depths.
		a = mtpArgs(2)
		a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 2, 2
		a.Model.PipelineModelParallelLayout = "Ett|tt|mm|L"
		a.PipelineSchedule = name[len("pp2-standalone-"):]
	case "pp2-standalone-tp2-sp", "pp2-standalone-cp2":
		a = mtpArgs(4)
		a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 2, 2
		a.Model.PipelineModelParallelLayout = "Ett|tt|mm|L"
		if name == "pp2-standalone-cp2" {
			a.Model.ContextParallelSize = 2
		} else {
			a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true
		}
	case "doc-E|t*3|(t|)*5mmL", "doc-E|t*3|(t|)*4tmm|L", "doc-E|t*3|(t|)*3tt|mm|L":
		// The reference's documented MTP layouts (with two m), for 8
		// layers over PP 4 × VPP 2.
		a = mtpArgs(4)
		a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = 4, 2
		a.Model.PipelineModelParallelLayout = name[len("doc-"):]
	case "dp2-distopt":
		a = mtpArgs(2)
		a.DDP.UseDistributedOptimizer, a.DDP.OverlapGradReduce = true, true
	case "recompute-full":
		a = mtpArgs(1)
		a.Model.RecomputeGranularity, a.Model.RecomputeMethod, a.Model.RecomputeNumLayers = "full", "uniform", 1
	case "recompute-selective":
		a = mtpArgs(1)
		a.Model.RecomputeGranularity = "selective"
	case "ep2", "ep2-pp2":
		a = mtpArgs(2)
		a.Model.ExpertModelParallelSize = 2
		if name == "ep2-pp2" {
			a = mtpArgs(4)
			a.Model.ExpertModelParallelSize, a.Model.PipelineModelParallelSize = 2, 2
		}
	default:
		panic("mtpLayout: " + name)
	}
	return a
}

// TestMTPCheckpointAcrossLayouts saves a model with two MTP depths at
// PP 2 with the distributed optimizer after 5 iterations and loads it at
// PP 2, on one rank (selective recompute), at TP 2 with SP and with a
// standalone MTP stage: the next 5 losses and depth losses equal an
// uninterrupted run's at the loading layout to 1e-6, so the depths'
// parameters travel by name (mtp.layers.{k}.…) like the decoder's.
func TestMTPCheckpointAcrossLayouts(t *testing.T) {
	layout := func(name string) Args {
		a := mtpLayout(name)
		a.TrainIters, a.LRDecayIters, a.EvalIters = 10, 10, 0
		return a
	}
	saving := layout("pp2")
	saving.DDP.UseDistributedOptimizer = true
	dir := t.TempDir()
	first := saving
	first.TrainIters, first.Save = 5, dir
	mustRun(t, first)
	for _, name := range []string{"pp2", "recompute-selective", "tp2-sp", "pp2-standalone"} {
		t.Run(name, func(t *testing.T) {
			a := layout(name)
			if name == "pp2" {
				a = saving
			}
			full := mustRun(t, a)
			b := a
			b.Load = dir
			res := mustRun(t, b)
			if res.StartIteration != 5 || len(res.Losses) != 5 || len(res.MTPLosses) != 5 {
				t.Fatalf("resumed at %d with %d losses and %d MTP losses, want 5, 5 and 5", res.StartIteration, len(res.Losses), len(res.MTPLosses))
			}
			for i, l := range res.Losses {
				if e := relErr(l, full.Losses[5+i]); e > 1e-6 {
					t.Errorf("iteration %d: resumed %.9f, uninterrupted %.9f", 6+i, l, full.Losses[5+i])
				}
				for k, v := range res.MTPLosses[i] {
					if e := relErr(v, full.MTPLosses[5+i][k]); e > 1e-6 {
						t.Errorf("iteration %d, depth %d: resumed %.9f, uninterrupted %.9f", 6+i, k+1, v, full.MTPLosses[5+i][k])
					}
				}
			}
		})
	}
}

// TestMTPSampleMatchesSingleRank: the text sample generated through a
// pipeline with a standalone MTP stage (the depths are dropped when
// generating, so every boundary carries the main hidden states alone) is
// the one-rank sample, in the loop placement and in ZB-V's V.
func TestMTPSampleMatchesSingleRank(t *testing.T) {
	sample := func(a Args) string {
		t.Helper()
		a.Model.VocabSize, a.TrainIters, a.LRWarmupIters, a.Sample = 256, 2, 0, 24
		return mustRun(t, a).Sample
	}
	want := sample(mtpArgs(1))
	if len(want) == 0 {
		t.Fatal("no sample on one rank")
	}
	for _, name := range []string{"pp2-standalone", "pp2-standalone-zb-v"} {
		if got := sample(mtpLayout(name)); got != want {
			t.Errorf("%s: sample %q, one rank %q", name, got, want)
		}
	}
}
