package gpt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// TestActivationMemoryMatchesEstimate runs one micro-batch forward on 1, 2
// and 4 tensor-parallel ranks, with and without sequence parallelism,
// dropout and each recompute setting, and under context parallelism (cp 2
// and 4, alone and with TP2 + SP, ring and all-to-all), and checks that the measured
// activation bytes of the embeddings, of every layer and of the head equal
// EstimateActivations exactly (the formulas of docs/MEMORY.md), and that
// backward releases everything.
func TestActivationMemoryMatchesEstimate(t *testing.T) {
	type variant struct {
		tp         int
		sp         bool
		dropout    float32
		recompute  config.Recompute
		vocab      int
		microBatch int
		cp         int
		comm       string
		opts       string // a model-options preset of optionPresets
	}
	full := func(method string, n int, dist bool) config.Recompute {
		return config.Recompute{RecomputeGranularity: "full", RecomputeMethod: method, RecomputeNumLayers: n, DistributeSavedActivations: dist}
	}
	var vs []variant
	for _, n := range []int{1, 2, 4} {
		for _, sp := range []bool{false, true} {
			if sp && n == 1 {
				continue
			}
			for _, rc := range []config.Recompute{{}, {RecomputeGranularity: "selective"}, full("uniform", 2, false), full("uniform", 1, n > 1 && !sp)} {
				for _, p := range []float32{0, 0.1} {
					vs = append(vs, variant{n, sp, p, rc, 100, 2, 1, "", ""})
				}
			}
		}
	}
	vs = append(vs, variant{1, false, 0, config.Recompute{}, 128, 3, 1, "", ""}, variant{2, true, 0.1, full("block", 1, false), 256, 1, 1, "", ""})
	for _, c := range []string{"p2p", "a2a"} {
		for _, rc := range []config.Recompute{{}, {RecomputeGranularity: "selective"}, full("uniform", 1, false)} {
			vs = append(vs, variant{1, false, 0.1, rc, 100, 2, 2, c, ""}, variant{2, true, 0.1, rc, 100, 2, 2, c, ""}, variant{1, false, 0, rc, 100, 1, 4, c, ""})
		}
	}
	for _, o := range []string{"llama", "qknorm", "misc", "mtp", "mla", "mla-noq", "moe", "moe-mixed", "moe-pad", "moe-a2a", "moe-mtp"} {
		for _, rc := range []config.Recompute{{}, {RecomputeGranularity: "selective"}, full("uniform", 1, false)} {
			if rc.RecomputeGranularity == "full" && strings.HasPrefix(o, "moe") {
				continue // MoE refuses full recompute
			}
			vs = append(vs, variant{1, false, 0.1, rc, 100, 2, 1, "", o}, variant{2, true, 0.1, rc, 100, 2, 1, "", o}, variant{1, false, 0, rc, 100, 1, 2, "p2p", o})
		}
	}
	for _, v := range vs {
		name := fmt.Sprintf("tp%d/sp=%v/p=%v/%s-%s-%d-dist=%v/V%d/b%d/cp%d%s/%s", v.tp, v.sp, v.dropout, v.recompute.RecomputeGranularity,
			v.recompute.RecomputeMethod, v.recompute.RecomputeNumLayers, v.recompute.DistributeSavedActivations, v.vocab, v.microBatch, v.cp, v.comm, v.opts)
		t.Run(name, func(t *testing.T) {
			cfg := config.DefaultTransformerConfig()
			cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.SeqLength, cfg.VocabSize = 4, 32, 4, 16, v.vocab
			cfg.HiddenDropout, cfg.AttentionDropout = v.dropout, v.dropout
			cfg.TensorModelParallelSize, cfg.SequenceParallel, cfg.Recompute = v.tp, v.sp, v.recompute
			cfg.ContextParallelSize = v.cp
			if v.comm != "" {
				cfg.CPCommType = []string{v.comm}
			}
			if v.opts != "" {
				optionPresets[v.opts](&cfg)
			}
			want := EstimateActivations(cfg, v.microBatch)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := local.NewWorld(v.tp*v.cp, comm.Options{}).Run(ctx, func(ctx context.Context, w comm.Group) error {
				groups, err := mesh.Initialize(ctx, w, mesh.Sizes{TP: v.tp, PP: 1, CP: v.cp, EP: 1, ETP: max(cfg.EffectiveExpertTensorParallelSize(), 1)})
				if err != nil {
					return err
				}
				g := groups.TP()
				m, err := NewParallel(cfg, rng.New(5), g, WithExperts(moe.Parallel{EP: groups.Get(mesh.GroupEP), ETP: groups.Get(mesh.GroupExptTP),
					TPEP: groups.Get(mesh.GroupTPEP), TPCP: groups.Get(mesh.GroupTPCP)}))
				if err != nil {
					return err
				}
				if m.CP, err = cp.NewGroups(ctx, groups.CP(), nil); err != nil {
					return err
				}
				tracker, def, err := tp.ModelParallelManualSeed(9+uint64(groups.CP().Rank()), g.Rank(), 0, 0)
				if err != nil {
					return err
				}
				var st ActivationStats
				tape := autograd.NewTape(ctx)
				b := data.MockDataset{Seed: 1, Vocab: cfg.VocabSize, Seq: cfg.SeqLength}.Batch(data.ConstantStep(0, v.microBatch), 0, v.microBatch)
				r, n := m.CP.Rank(), m.CP.Size()
				var mtp []MTPInputs
				for k := range cfg.MTPNumLayers {
					d := MTPBatch(b, k) // (the test's CP split cuts the rolled rows as it cuts b)
					mtp = append(mtp, MTPInputs{IDs: cp.Split(d.InputIDs, d.Rows, d.Seq, n, r), Labels: cp.Split(d.Labels, d.Rows, d.Seq, n, r)})
				}
				b = data.Batch{Rows: b.Rows, Seq: b.Seq / n, InputIDs: cp.Split(b.InputIDs, b.Rows, b.Seq, n, r),
					Labels: cp.Split(b.Labels, b.Rows, b.Seq, n, r), LossMask: cp.Split(b.LossMask, b.Rows, b.Seq, n, r)}
				losses, err := m.ForwardInputs(tape, Inputs{IDs: b.InputIDs, Labels: b.Labels, Rows: b.Rows, Seq: b.Seq, Stats: &st, MTP: mtp},
					&Randomness{Default: def, Tracker: tracker}, nil)
				if err != nil {
					return err
				}
				got := ActivationEstimate{Embedding: st.AfterEmbedding - st.Start, Head: st.AfterHead - st.AfterLayer[len(st.AfterLayer)-1], Total: st.AfterLoss - st.Start}
				prevMTP := st.AfterHead
				for k, x := range st.AfterMTP {
					if x-prevMTP != want.MTP {
						return fmt.Errorf("rank %d: MTP depth %d holds %d bytes, estimate %d", g.Rank(), k, x-prevMTP, want.MTP)
					}
					prevMTP = x
				}
				layers := []int64{}
				prev := st.AfterEmbedding
				for _, x := range st.AfterLayer {
					layers = append(layers, x-prev)
					prev = x
				}
				if got.Embedding != want.Embedding || got.Head != want.Head || got.Total != want.Total {
					return fmt.Errorf("rank %d: measured embedding %d, head %d, total %d bytes; estimate %d, %d, %d (layers measured %v, estimate %d each)",
						g.Rank(), got.Embedding, got.Head, got.Total, want.Embedding, want.Head, want.Total, layers, want.PerLayer)
				}
				rc := cfg.Recompute
				plain := cfg
				plain.Recompute = config.Recompute{}
				for i, x := range layers {
					// A uniform chunk's bytes (its input) appear after its
					// first layer, the rest of the chunk adds none; block
					// recompute leaves the layers after the first n whole.
					w := want.Layer(cfg, i)
					switch {
					case rc.RecomputeMethod == "uniform" && i%rc.RecomputeNumLayers == 0:
						w *= int64(rc.RecomputeNumLayers)
					case rc.RecomputeMethod == "uniform":
						w = 0
					case rc.RecomputeMethod == "block" && i >= rc.RecomputeNumLayers:
						w = EstimateActivations(plain, v.microBatch).PerLayer
					}
					if x != w {
						return fmt.Errorf("rank %d: layer %d holds %d bytes, estimate %d", g.Rank(), i, x, w)
					}
				}
				l := autograd.WeightedSum(tape, losses, tensor.Full(1, losses.Value.Len()))
				if err := autograd.Backward(tape, l, nil); err != nil {
					return err
				}
				if n := tape.ActivationBytes(); n != 0 {
					return fmt.Errorf("rank %d: %d activation bytes left after backward", g.Rank(), n)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// optionPresets set the Llama-class model options on a test config (4
// heads, width 32): a Llama-shaped model, LayerNorm with qk_layernorm and
// other head sizes, and the remaining options.
var optionPresets = map[string]func(c *config.TransformerConfig){
	"llama": func(c *config.TransformerConfig) {
		c.Normalization, c.ActivationFunc, c.GatedLinearUnit = config.RMSNormType, config.SiLU, true
		c.FFNHiddenSize, c.PositionEmbeddingType, c.NumQueryGroups = 48, config.RoPE, 2
		c.ShareEmbeddingsAndOutputWeights, c.AddBiasLinear = false, false
	},
	"qknorm": func(c *config.TransformerConfig) {
		c.LayernormZeroCenteredGamma, c.QKLayernorm, c.PositionEmbeddingType = true, true, config.RoPE
		c.RotaryInterleaved, c.RotaryPercent, c.KVChannels, c.NumQueryGroups = true, 0.5, 12, 2
		c.AddBiasLinear, c.AddQKVBias = false, true
	},
	"mla": func(c *config.TransformerConfig) {
		c.Normalization, c.QKLayernorm, c.PositionEmbeddingType = config.RMSNormType, true, config.RoPE
		c.MLA = config.MLA{MultiLatentAttention: true, QLoRARank: 16, KVLoRARank: 12, QKHeadDim: 6, QKPosEmbHeadDim: 4, VHeadDim: 8,
			RopeType: "yarn", RotaryScalingFactor: 4, OriginalMaxPositionEmbeddings: 8, BetaFast: 32, BetaSlow: 1, MScale: 1, MScaleAllDim: 1}
	},
	"mla-noq": func(c *config.TransformerConfig) {
		c.PositionEmbeddingType = config.RoPE
		c.MLA = config.MLA{MultiLatentAttention: true, KVLoRARank: 12, QKHeadDim: 8, QKPosEmbHeadDim: 4, VHeadDim: 16, RopeType: "rope"}
	},
	"moe": func(c *config.TransformerConfig) {
		c.NumMoEExperts, c.MoERouterTopK, c.MoEFFNHiddenSize, c.MoEGroupedGEMM = 4, 2, 24, true
		c.MoERouterLoadBalancingType, c.MoEAuxLossCoeff = "aux_loss", 1e-2
	},
	"moe-mixed": func(c *config.TransformerConfig) { // SequentialMLP, shared experts, biases, DeepSeek's router
		c.NumMoEExperts, c.MoELayerFreq, c.MoERouterTopK, c.MoESharedExpertIntermediateSize = 4, []int{0, 1, 1, 0}, 2, 16
		c.GatedLinearUnit, c.ActivationFunc, c.MoERouterScoreFunction, c.MoERouterEnableExpertBias = true, config.SiLU, "sigmoid", true
		c.MoERouterNumGroups, c.MoERouterGroupTopK, c.MoERouterLoadBalancingType, c.MoEAuxLossCoeff, c.MoEZLossCoeff = 2, 1, "seq_aux_loss", 1e-3, 1e-3
	},
	"moe-pad": func(c *config.TransformerConfig) {
		c.NumMoEExperts, c.MoERouterTopK, c.MoEExpertCapacityFactor, c.MoEPadExpertInputToCapacity = 4, 2, 0.5, true
		c.MoERouterLoadBalancingType = "none"
	},
	"moe-a2a": func(c *config.TransformerConfig) {
		c.NumMoEExperts, c.MoERouterTopK, c.MoETokenDispatcherType, c.MoEGroupedGEMM, c.MoERouterPreSoftmax = 4, 1, "alltoall", true, true
		c.MoERouterLoadBalancingType, c.MoEZLossCoeff = "none", 1e-3
	},
	"moe-mtp": func(c *config.TransformerConfig) {
		c.NumMoEExperts, c.MoERouterTopK, c.MoELayerFreq, c.MTPNumLayers, c.PositionEmbeddingType = 4, 2, []int{0, 0, 0, 1}, 1, config.RoPE
	},
	"mtp": func(c *config.TransformerConfig) {
		c.PositionEmbeddingType, c.MTPNumLayers = config.RoPE, 2
	},
	"misc": func(c *config.TransformerConfig) {
		c.Normalization, c.LayernormZeroCenteredGamma, c.QKLayernorm = config.RMSNormType, true, true
		c.PositionEmbeddingType, c.ActivationFunc, c.ApplyResidualConnectionPostLayernorm = config.NoPositions, config.SquaredReLU, true
		c.NumQueryGroups, c.ShareEmbeddingsAndOutputWeights = 2, false
	},
}
