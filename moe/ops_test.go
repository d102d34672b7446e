package moe

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// TestGroupedMatchesSequential runs the same rows through GroupedMLP and
// SequentialMLP (gated SiLU and plain squared ReLU, with an expert of no
// rows among them) and compares the outputs and the gradients of the
// rows and of every weight: the same GEMMs, so equal to 1e-6.
func TestGroupedMatchesSequential(t *testing.T) {
	const h, f = 8, 6
	counts := []int{3, 0, 5, 1}
	n := 9
	for _, c := range []struct {
		act   kernels.Activation
		gated bool
	}{{kernels.SiLU, true}, {kernels.SquaredReLU, false}} {
		t.Run(fmt.Sprintf("act%d/gated=%v", c.act, c.gated), func(t *testing.T) {
			f1 := f
			if c.gated {
				f1 = 2 * f
			}
			run := func(grouped bool) (y, dx []float32, dw [][]float32) {
				tape := autograd.NewTape(context.Background())
				x := autograd.NewLeaf(tensor.FromSlice(randn(1, n*h, 1), n, h), "x", true)
				var w1, w2 []*autograd.Var
				for j := range counts {
					a := autograd.NewLeaf(tensor.FromSlice(randn(uint64(10+j), f1*h, 0.3), f1, h), "w1", true)
					b := autograd.NewLeaf(tensor.FromSlice(randn(uint64(20+j), h*f, 0.3), h, f), "w2", true)
					a.MarkParameter()
					b.MarkParameter()
					w1, w2 = append(w1, a), append(w2, b)
				}
				var out *autograd.Var
				if grouped {
					out = GroupedMLP(tape, x, w1, w2, counts, MLPOptions{Act: c.act, Gated: c.gated})
				} else {
					out = SequentialMLP(tape, x, w1, w2, counts, MLPOptions{Act: c.act, Gated: c.gated})
				}
				loss := autograd.WeightedSum(tape, autograd.View(tape, out, n*h), tensor.FromSlice(randn(3, n*h, 1), n*h))
				if err := autograd.Backward(tape, loss, nil); err != nil {
					t.Fatal(err)
				}
				for j := range counts {
					for _, w := range []*autograd.Var{w1[j], w2[j]} {
						if w.Grad == nil {
							dw = append(dw, make([]float32, w.Value.Len())) // no gradient: zero
						} else {
							dw = append(dw, w.Grad.Data())
						}
					}
				}
				return out.Value.Data(), x.Grad.Data(), dw
			}
			gy, gdx, gdw := run(true)
			sy, sdx, sdw := run(false)
			for _, p := range []struct {
				name string
				a, b []float32
			}{{"output", gy, sy}, {"rows' gradient", gdx, sdx}} {
				if d := numtest.RelNorm(p.a, p.b); d > 1e-6 {
					t.Errorf("%s: grouped and sequential differ by %.2g", p.name, d)
				}
			}
			for i := range gdw {
				if zero(gdw[i]) && zero(sdw[i]) {
					continue // the expert without rows
				}
				if numtest.RelNorm(gdw[i], sdw[i]) > 1e-6 {
					t.Errorf("weight %d: gradients differ by %.2g", i, numtest.RelNorm(gdw[i], sdw[i]))
				}
			}
		})
	}
}

// zero reports whether every element of x is 0.
func zero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}
