package train

import (
	"fmt"
	"testing"

	"github.com/gotron/gotron/config"
)

// mlaArgs is llamaArgs without grouped queries (MLA refuses them), with
// qk_layernorm (MLA's q and kv norms) and multi-latent attention: a query
// latent of 16, a key-value latent of 16, heads of 8 + 8 rotary query and
// key channels and 12 value channels.
func mlaArgs(world int) Args {
	a := llamaArgs(world)
	m := &a.Model
	m.NumQueryGroups, m.QKLayernorm = 0, true
	m.MLA = config.MLA{MultiLatentAttention: true, QLoRARank: 16, KVLoRARank: 16, QKHeadDim: 8, QKPosEmbHeadDim: 8, VHeadDim: 12,
		RopeType: "rope", RotaryScalingFactor: 1, OriginalMaxPositionEmbeddings: 4096, BetaFast: 32, BetaSlow: 1, MScale: 1}
	return a
}

// TestMLAMatchesSingleRank is the layout-equivalence test of multi-latent
// attention: the 20-step loss curve and the final validation loss equal
// one rank's to 1e-6 and the first step's gathered gradients to 1e-5,
// under TP 2 with and without SP (the down projections gathered, the
// latents scattered back), CP 2 with p2p and a2a (the rotary positions of
// each rank's chunks), PP 2, DP 2 with the distributed optimizer, full
// and selective recompute; for MLA with a query latent and DeepSeek-V3's
// YaRN, and without the query latent (linear_q_proj).
func TestMLAMatchesSingleRank(t *testing.T) {
	for _, variant := range []struct {
		name string
		set  func(m *config.TransformerConfig)
	}{
		{"yarn", func(m *config.TransformerConfig) {
			m.RopeType, m.RotaryScalingFactor, m.MScale, m.MScaleAllDim, m.OriginalMaxPositionEmbeddings = "yarn", 40, 1, 1, 8
		}},
		{"no-q-latent", func(m *config.TransformerConfig) { m.QLoRARank = 0 }},
	} {
		t.Run(variant.name, func(t *testing.T) {
			one := mlaArgs(1)
			variant.set(&one.Model)
			wantLoss, wantGrads := tpRun(t, one)
			for _, l := range []llamaLayout{
				{world: 2, tp: 2, sp: true}, {world: 2, tp: 2}, {world: 2, cp: 2, comm: "p2p"}, {world: 2, cp: 2, comm: "a2a"},
				{world: 2, pp: 2}, {world: 2, distOpt: true},
			} {
				t.Run(l.String(), func(t *testing.T) {
					a := l.args()
					a.Model.NumQueryGroups, a.Model.QKLayernorm, a.Model.MLA = 0, true, mlaArgs(1).Model.MLA
					variant.set(&a.Model)
					losses, grads := tpRun(t, a)
					checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
				})
			}
			for _, rc := range []config.Recompute{{RecomputeGranularity: "selective"}, {RecomputeGranularity: "full", RecomputeMethod: "uniform", RecomputeNumLayers: 1}} {
				t.Run(fmt.Sprintf("recompute-%s", rc.RecomputeGranularity), func(t *testing.T) {
					a := one
					a.Model.Recompute = rc
					losses, grads := tpRun(t, a)
					checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
				})
			}
		})
	}
}

// TestMLACheckpointAcrossLayouts saves an MLA model (query latent, YaRN)
// at TP 2 with SP after 5 iterations and loads it on one rank, at PP 2
// and at CP 2: the next 5 losses equal an uninterrupted run's at the
// loading layout to 1e-6, so the column-parallel projections travel as
// whole tensors.
func TestMLACheckpointAcrossLayouts(t *testing.T) {
	layout := func(l llamaLayout) Args {
		a := l.args()
		a.Model.NumQueryGroups, a.Model.QKLayernorm, a.Model.MLA = 0, true, mlaArgs(1).Model.MLA
		a.Model.RopeType, a.Model.RotaryScalingFactor, a.Model.MScaleAllDim, a.Model.OriginalMaxPositionEmbeddings = "yarn", 40, 1, 8
		a.TrainIters, a.LRDecayIters, a.EvalIters = 10, 10, 0
		return a
	}
	dir := t.TempDir()
	first := layout(llamaLayout{world: 2, tp: 2, sp: true})
	first.TrainIters, first.Save = 5, dir
	mustRun(t, first)
	for _, l := range []llamaLayout{{world: 1}, {world: 2, pp: 2}, {world: 2, cp: 2, comm: "p2p"}} {
		t.Run(l.String(), func(t *testing.T) {
			a := layout(l)
			full := mustRun(t, a)
			a.Load = dir
			res := mustRun(t, a)
			if res.StartIteration != 5 || len(res.Losses) != 5 {
				t.Fatalf("resumed at %d with %d losses, want 5 and 5", res.StartIteration, len(res.Losses))
			}
			for i, loss := range res.Losses {
				if e := relErr(loss, full.Losses[5+i]); e > 1e-6 {
					t.Errorf("iteration %d: resumed %.9f, uninterrupted %.9f", 6+i, loss, full.Losses[5+i])
				}
			}
		})
	}
}
