package train

import (
	"fmt"
	"testing"
)

// cpLayout is a context-parallel layout of the layout-equivalence test.
type cpLayout struct {
	world, cp, tp, pp int
	comm              string
	hierarchical      []int
	sp, distOpt       bool
	recompute         string
}

func (l cpLayout) String() string {
	s := fmt.Sprintf("world%d/cp%d/%s", l.world, l.cp, l.comm)
	if l.hierarchical != nil {
		s += fmt.Sprint(l.hierarchical)
	}
	if l.tp > 1 {
		s += fmt.Sprintf("/tp%d/sp=%v", l.tp, l.sp)
	}
	if l.pp > 1 {
		s += fmt.Sprintf("/pp%d", l.pp)
	}
	if l.distOpt {
		s += "/distopt"
	}
	if l.recompute != "" {
		s += "/recompute=" + l.recompute
	}
	return s
}

// args is tpArgs at sequence length 32 (2·cp chunks of 4 to 8 tokens) in
// layout l.
func (l cpLayout) args() Args {
	a := tpArgs(l.world, max(l.tp, 1))
	a.Model.SeqLength = 32
	a.Model.ContextParallelSize = l.cp
	if l.comm != "" {
		a.Model.CPCommType = []string{l.comm}
	}
	a.Model.HierarchicalContextParallelSizes = l.hierarchical
	a.Model.SequenceParallel = l.sp
	a.Model.PipelineModelParallelSize = max(l.pp, 1)
	a.DDP.UseDistributedOptimizer = l.distOpt
	setRecompute(&a, l.recompute)
	return a
}

// TestContextParallelMatchesSingleRank is the context-parallel
// layout-equivalence test: CP 2 and 4 with every communication type, CP2 ×
// TP2 with sequence parallelism, CP2 × PP2 × DP2 on 8 ranks with the
// distributed optimizer, and CP with full and selective recompute: the
// 20-step loss curve and the final validation loss equal the one-rank ones
// to 1e-6 relative, the first step's gathered gradients to 1e-5.
func TestContextParallelMatchesSingleRank(t *testing.T) {
	wantLoss, wantGrads := tpRun(t, cpLayout{world: 1, cp: 1}.args())
	var layouts []cpLayout
	for _, n := range []int{2, 4} {
		for _, c := range []string{"p2p", "all_gather", "a2a"} {
			layouts = append(layouts, cpLayout{world: n, cp: n, comm: c})
		}
		layouts = append(layouts, cpLayout{world: n, cp: n, comm: "a2a+p2p", hierarchical: []int{2, n / 2}})
	}
	layouts = append(layouts,
		cpLayout{world: 4, cp: 2, tp: 2, comm: "p2p", sp: true},
		cpLayout{world: 4, cp: 2, tp: 2, comm: "a2a", sp: true},
		cpLayout{world: 8, cp: 2, pp: 2, comm: "p2p", distOpt: true},
		cpLayout{world: 2, cp: 2, comm: "p2p", recompute: "full"},
		cpLayout{world: 2, cp: 2, comm: "all_gather", recompute: "selective"},
	)
	for _, l := range layouts {
		t.Run(l.String(), func(t *testing.T) {
			losses, grads := tpRun(t, l.args())
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}
