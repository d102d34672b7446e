package train

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gotron/gotron/ckpt"
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

// moeLayout is a layout of the MoE layout-equivalence test.
type moeLayout struct {
	world, tp, etp, ep, pp, vpp, cp int
	sp, distOpt, grouped            bool
	dispatcher                      string
}

func (l moeLayout) String() string {
	return fmt.Sprintf("world%d/tp%d/sp=%v/etp%d/ep%d/pp%d/vpp%d/cp%d/distopt=%v/grouped=%v/%s", l.world, l.tp, l.sp, l.etp, l.ep, l.pp, l.vpp, l.cp, l.distOpt, l.grouped, l.dispatcher)
}

// splitsSequences reports whether the layout splits a sequence's tokens
// over ranks (sequence or context parallel): capacity dropping then
// applies to each rank's part, not to the one-rank micro-batch.
func (l moeLayout) splitsSequences() bool { return l.sp && l.tp > 1 || l.cp > 1 }

func (l moeLayout) args() Args {
	a := moeArgs(l.world)
	m := &a.Model
	m.TensorModelParallelSize, m.SequenceParallel = max(l.tp, 1), l.sp
	m.ExpertModelParallelSize, m.ExpertTensorParallelSize = max(l.ep, 1), l.etp
	m.PipelineModelParallelSize, m.VirtualPipelineModelParallelSize = max(l.pp, 1), l.vpp
	m.ContextParallelSize = max(l.cp, 1)
	if l.dispatcher != "" {
		m.MoETokenDispatcherType = l.dispatcher
	}
	a.DDP.UseDistributedOptimizer = l.distOpt
	m.MoEGroupedGEMM = l.grouped
	return a
}

// moeLayouts are the layouts TestMoEMatchesSingleRank runs: data and
// pipeline parallel; expert parallel 2 and 4 with each dispatcher; expert
// tensor parallel (alone, under EP, and as the default ETP = TP under
// TP2 + SP); EP under TP2 + SP with ETP 1; EP with PP 2; EP × DP with the
// distributed optimizer; EP folded onto context-parallel ranks; the
// experts as one grouped GEMM (the others run them one after another).
var moeLayouts = []moeLayout{
	{world: 2}, {world: 2, pp: 2, vpp: 2},
	{world: 2, ep: 2}, {world: 2, ep: 2, dispatcher: "alltoall"}, {world: 2, ep: 2, grouped: true, dispatcher: "alltoall"},
	{world: 4, ep: 4}, {world: 4, ep: 4, dispatcher: "alltoall"},
	{world: 4, ep: 2, etp: 2}, {world: 4, ep: 2, etp: 2, dispatcher: "alltoall"},
	{world: 2, etp: 2, dispatcher: "alltoall"},
	{world: 4, tp: 2, sp: true, ep: 2}, {world: 4, tp: 2, sp: true, ep: 2, dispatcher: "alltoall"},
	{world: 4, tp: 2, sp: true, ep: 2, etp: 1, dispatcher: "alltoall"},
	{world: 4, ep: 2, pp: 2, dispatcher: "alltoall"},
	{world: 4, ep: 2, distOpt: true, dispatcher: "alltoall"},
	{world: 2, cp: 2, ep: 2, dispatcher: "alltoall"},
}

// TestMoEMatchesSingleRank is the layout-equivalence test of MoE layers
// (moeLayouts): the 20-step loss curve and the first step's gathered
// gradients equal one rank's to 1e-6 and 1e-5, for the softmax router with
// both auxiliary losses in every layer and, on the layouts that keep each
// micro-batch's tokens on one rank, for sigmoid routing with the expert
// bias, groups, scaling, the sequence-level loss, token dropping and a
// shared expert in every other layer; and with add_bias_linear (biases on
// the router, every expert and the shared expert), which the reference
// allows only at ETP 1 and gotron at every layout.
func TestMoEMatchesSingleRank(t *testing.T) {
	for _, variant := range []struct {
		name string
		drop bool
		set  func(m *config.TransformerConfig)
	}{
		{"softmax", false, func(*config.TransformerConfig) {}},
		{"sigmoid-bias-drop-shared", true, func(m *config.TransformerConfig) {
			m.NumMoEExperts, m.MoELayerFreq = 8, []int{2}
			m.MoERouterScoreFunction, m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = "sigmoid", true, 0.01
			m.MoERouterNumGroups, m.MoERouterGroupTopK, m.MoERouterTopKScalingFactor = 4, 2, 2
			m.MoERouterLoadBalancingType, m.MoEZLossCoeff = "seq_aux_loss", 0
			m.MoEExpertCapacityFactor, m.MoESharedExpertIntermediateSize = 1, 32
		}},
		{"biases-shared", false, func(m *config.TransformerConfig) {
			m.AddBiasLinear, m.MoESharedExpertIntermediateSize = true, 32
		}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			one := moeArgs(1)
			variant.set(&one.Model)
			wantLoss, wantGrads := tpRun(t, one)
			names := []string{"decoder.layers.0.mlp.router.weight", "decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight"}
			if one.Model.AddBiasLinear {
				names = append(names, "decoder.layers.0.mlp.router.bias", "decoder.layers.1.mlp.experts.local_experts.2.linear_fc1.bias",
					"decoder.layers.1.mlp.experts.local_experts.2.linear_fc2.bias", "decoder.layers.0.mlp.shared_experts.linear_fc2.bias")
			}
			for _, name := range names {
				if _, ok := wantGrads.Get(name); !ok {
					t.Fatalf("no gradient for %s: the MoE layer is not in effect", name)
				}
			}
			for _, l := range moeLayouts {
				if variant.drop && l.splitsSequences() {
					continue
				}
				t.Run(l.String(), func(t *testing.T) {
					a := l.args()
					variant.set(&a.Model)
					losses, grads := tpRun(t, a)
					checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
				})
			}
		})
	}
}

// TestMoECheckpointAcrossExpertLayouts saves a MoE model with the expert
// bias (sigmoid routing) and add_bias_linear (the router's bias, the
// experts' linear_fc1 biases split over ETP, their linear_fc2 biases
// whole) at EP 2 × ETP 2 with the distributed optimizer
// after 5 iterations and loads it at one rank, at EP 4 and at EP 2 × TP 2
// with SP: the next 5 losses equal an uninterrupted run's at the loading
// layout to 1e-6 (bit for bit at the saving layout), so experts are saved
// by global index and the expert bias travels with them.
func TestMoECheckpointAcrossExpertLayouts(t *testing.T) {
	layout := func(l moeLayout) Args {
		a := l.args()
		m := &a.Model
		m.MoERouterScoreFunction, m.MoERouterEnableExpertBias, m.MoERouterBiasUpdateRate = "sigmoid", true, 0.01
		m.AddBiasLinear = true
		a.TrainIters, a.LRDecayIters, a.EvalIters = 10, 10, 0
		return a
	}
	saving := layout(moeLayout{world: 4, ep: 2, etp: 2, distOpt: true, dispatcher: "alltoall"})
	dir := t.TempDir()
	first := saving
	first.TrainIters, first.Save = 5, dir
	mustRun(t, first)
	r, err := ckpt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if l := r.Manifest.Layout; l.EP != 2 || l.ETP != 2 {
		t.Errorf("the manifest records ep %d, etp %d; want 2, 2", l.EP, l.ETP)
	}
	for name, want := range map[string][]int{
		"decoder.layers.0.mlp.router.expert_bias":                      {4},
		"decoder.layers.0.mlp.router.bias":                             {4},
		"decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.bias": {64},
		"decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.bias": {32},
	} {
		if s := r.Manifest.Tensors[ckpt.ModelKey+name]; !slices.Equal(s, want) {
			t.Errorf("the manifest's %s is %v, want %v", name, s, want)
		}
	}
	for _, c := range []struct {
		name  string
		a     Args
		exact bool
	}{
		{"same layout", saving, true},
		{"one rank", layout(moeLayout{world: 1}), false},
		{"EP4", layout(moeLayout{world: 4, ep: 4}), false},
		{"EP2 TP2 SP", layout(moeLayout{world: 4, tp: 2, sp: true, ep: 2}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := mustRun(t, c.a)
			b := c.a
			b.Load = dir
			res := mustRun(t, b)
			if res.StartIteration != 5 || len(res.Losses) != 5 {
				t.Fatalf("resumed at %d with %d losses, want 5 and 5", res.StartIteration, len(res.Losses))
			}
			for i, l := range res.Losses {
				want := full.Losses[5+i]
				if c.exact && l != want || relErr(l, want) > 1e-6 {
					t.Errorf("iteration %d: resumed %.9f, uninterrupted %.9f (relative %.2g)", 6+i, l, want, relErr(l, want))
				}
			}
		})
	}
}

// TestMoEOverlapWithIdleExperts trains with overlapped gradient
// reduction and the sequential experts, top-1 routing over 8 experts, so
// that experts receive no rows in some micro-batches: their weights must
// still report their gradients (else the bucket never starts and the
// iteration fails). DP 2 and EP 2 × DP 2 follow one rank's losses to 1e-6.
func TestMoEOverlapWithIdleExperts(t *testing.T) {
	set := func(a *Args) {
		m := &a.Model
		m.NumMoEExperts, m.MoERouterTopK, m.MoERouterPreSoftmax = 8, 1, true
		a.DDP.OverlapGradReduce = true
	}
	one := moeArgs(1)
	set(&one)
	want, _ := tpRun(t, one)
	for _, l := range []moeLayout{{world: 2}, {world: 4, ep: 2, dispatcher: "alltoall"}} {
		t.Run(l.String(), func(t *testing.T) {
			a := l.args()
			set(&a)
			got, _ := tpRun(t, a)
			for i := range want {
				if e := relErr(got[i], want[i]); e > 1e-6 {
					t.Errorf("%s: %.9f, one rank %.9f (relative %.2g)", lossLabel(i, len(want)), got[i], want[i], e)
				}
			}
		})
	}
}
