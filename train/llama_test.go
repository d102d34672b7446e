package train

import (
	"fmt"
	"testing"

	"github.com/gotron/gotron/config"
)

// llamaArgs is ppArgs (4 layers, width 32, 4 heads, sequence 32) shaped as
// a Llama-class model: RMSNorm, SwiGLU (ffn 48), RoPE, grouped-query
// attention with 2 groups, an untied output layer and no biases.
func llamaArgs(world int) Args {
	a := ppArgs(world, 1, 1)
	a.Model.SeqLength = 32
	m := &a.Model
	m.Normalization, m.ActivationFunc, m.GatedLinearUnit = config.RMSNormType, config.SiLU, true
	m.FFNHiddenSize, m.PositionEmbeddingType, m.NumQueryGroups = 48, config.RoPE, 2
	m.ShareEmbeddingsAndOutputWeights, m.AddBiasLinear = false, false
	return a
}

// llamaLayout is a layout of the Llama layout-equivalence test.
type llamaLayout struct {
	world, tp, pp, vpp, cp int
	sp, distOpt            bool
	comm                   string
	hierarchical           []int
}

func (l llamaLayout) String() string {
	return fmt.Sprintf("world%d/tp%d/sp=%v/pp%d/vpp%d/cp%d%s%v/distopt=%v", l.world, l.tp, l.sp, l.pp, l.vpp, l.cp, l.comm, l.hierarchical, l.distOpt)
}

func (l llamaLayout) args() Args {
	a := llamaArgs(l.world)
	m := &a.Model
	m.TensorModelParallelSize, m.SequenceParallel = max(l.tp, 1), l.sp
	m.PipelineModelParallelSize, m.VirtualPipelineModelParallelSize = max(l.pp, 1), l.vpp
	m.ContextParallelSize, m.HierarchicalContextParallelSizes = max(l.cp, 1), l.hierarchical
	if l.comm != "" {
		m.CPCommType = []string{l.comm}
	}
	a.DDP.UseDistributedOptimizer = l.distOpt
	return a
}

// TestLlamaMatchesSingleRank is the layout-equivalence test of the
// Llama-shaped model (llamaArgs): TP2 with sequence parallelism, PP2 with
// virtual stages, CP2 with every communication type, and TP2 × PP2 × DP2
// with the distributed optimizer: the 20-step loss curve and the final
// validation loss equal the one-rank ones to 1e-6 relative, the first
// step's gathered gradients to 1e-5.
func TestLlamaMatchesSingleRank(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, llamaArgs(1))
	// The options are in effect: an untied output layer, no position
	// embedding, no biases, grouped QKV rows (4 + 2·2)·8 and gated FC1 rows.
	for name, shape := range map[string][]int{
		"output_layer.weight":                               {100, 32},
		"decoder.layers.0.self_attention.linear_qkv.weight": {64, 32},
		"decoder.layers.0.mlp.linear_fc1.weight":            {96, 32},
		"embedding.position_embeddings.weight":              nil,
		"decoder.layers.0.input_layernorm.bias":             nil,
		"decoder.layers.0.mlp.linear_fc2.bias":              nil,
	} {
		g, ok := wantGrads.Get(name)
		if ok != (shape != nil) || ok && fmt.Sprint(g.Shape) != fmt.Sprint(shape) {
			t.Fatalf("one-rank gradients: %s present %v (shape %v), want shape %v", name, ok, g.Shape, shape)
		}
	}
	layouts := []llamaLayout{
		{world: 2, tp: 2, sp: true},
		{world: 2, pp: 2, vpp: 2},
		{world: 8, tp: 2, pp: 2, distOpt: true},
	}
	for _, c := range []string{"p2p", "all_gather", "a2a"} {
		layouts = append(layouts, llamaLayout{world: 2, cp: 2, comm: c})
	}
	layouts = append(layouts, llamaLayout{world: 4, cp: 4, comm: "a2a+p2p", hierarchical: []int{2, 2}})
	for _, l := range layouts {
		t.Run(l.String(), func(t *testing.T) {
			losses, grads := tpRun(t, l.args())
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}
