package train

import (
	"testing"

	"github.com/gotron/gotron/config"
)

// moeArgs is llamaArgs with MoE layers: 4 experts of width 32, top-2
// softmax routing, the load-balancing loss (0.01) and the z loss (0.001)
// in every layer.
func moeArgs(world int) Args {
	a := llamaArgs(world)
	m := &a.Model
	m.NumMoEExperts, m.MoEFFNHiddenSize = 4, 32
	m.MoEAuxLossCoeff, m.MoEZLossCoeff = 0.01, 0.001
	return a
}

// TestMoEMatchesSingleRank is the layout-equivalence test of MoE layers on
// the layouts they run on so far: DP 2 (the auxiliary losses' backward
// scale follows the microbatches per rank) and PP 2 with VPP 2; with the
// expert bias and token dropping (sigmoid routing, every other layer MoE,
// a shared expert), DP 2: the 20-step loss curve and the first step's
// gathered gradients equal one rank's to 1e-6 and 1e-5.
func TestMoEMatchesSingleRank(t *testing.T) {
	for _, variant := range []struct {
		name string
		set  func(m *config.TransformerConfig)
	}{
		{"softmax", func(*config.TransformerConfig) {}},
		{"sigmoid-bias-drop-shared", func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoELayerFreq = 8, []int{2}
			m.MoERouterScoreFunction, m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = "sigmoid", true, 0.01
			m.MoERouterNumGroups, m.MoERouterGroupTopK, m.MoERouterTopKScalingFactor = 4, 2, 2
			m.MoERouterLoadBalancingType, m.MoEZLossCoeff = "seq_aux_loss", 0
			m.MoEExpertCapacityFactor, m.MoESharedExpertIntermediateSize = 1, 32
		}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			one := moeArgs(1)
			variant.set(&one.Model)
			wantLoss, wantGrads := tpRun(t, one)
			for _, name := range []string{"decoder.layers.0.mlp.router.weight", "decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight"} {
				if _, ok := wantGrads.Get(name); !ok {
					t.Fatalf("no gradient for %s: the MoE layer is not in effect", name)
				}
			}
			for _, l := range []struct {
				name      string
				world, pp int
				vpp       int
			}{{"dp2", 2, 1, 0}, {"pp2-vpp2", 2, 2, 2}} {
				t.Run(l.name, func(t *testing.T) {
					a := moeArgs(l.world)
					variant.set(&a.Model)
					a.Model.PipelineModelParallelSize, a.Model.VirtualPipelineModelParallelSize = l.pp, l.vpp
					losses, grads := tpRun(t, a)
					checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
				})
			}
		})
	}
}
