package bench

import (
	"math"
	"strings"
	"testing"
)

// TestGemmShapesCoverTheModel checks gemmShapes against the FLOPs formula
// the benchmark reports: the linear layers' GEMMs are exactly its
// 6·T·(L·W + V·h), and the attention's blocks are its full-square term
// times 7/6 (backward recomputes the scores) times the causal blocks' share
// of the square.
func TestGemmShapesCoverTheModel(t *testing.T) {
	for _, name := range []string{"small", "medium", "medium-llama", "long"} {
		c := configs[name]
		T := c.MicroBatch * c.Seq
		var linear, attn float64
		for _, g := range gemmShapes(c, 2) {
			f := float64(g.count) * g.flops()
			if strings.HasPrefix(g.name, "attn") {
				attn += f
				if g.workers != 1 {
					t.Errorf("%s %s runs on %d threads, want 1", name, g.name, g.workers)
				}
			} else {
				linear += f
			}
		}
		full := 12 * float64(c.Layers*c.Hidden*c.Seq*T) // 12·L·n·d·s·T with n·d = h
		if got, want := linear, c.FLOPs(T)-full; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: linear GEMMs %.6g FLOPs, the formula %.6g", name, got, want)
		}
		b := float64(c.Seq / 64)
		causal := (b + 1) / (2 * b) // Σ 64·e over e = 64, 128, …, s, over s²
		if got, want := attn, full*7/6*causal; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: attention GEMMs %.6g FLOPs, want %.6g", name, got, want)
		}
	}
}
