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
// SequentialMLP (gated SiLU and plain squared ReLU, each with and without
// biases, the tanh GELU with them, an expert of no rows among them) and
// compares the outputs and the gradients of the rows and of every
// parameter: the same GEMMs, so equal to 1e-6.
func TestGroupedMatchesSequential(t *testing.T) {
	const h, f = 8, 6
	counts := []int{3, 0, 5, 1}
	n := 9
	for _, c := range []struct {
		act         kernels.Activation
		gated, bias bool
	}{{kernels.SiLU, true, false}, {kernels.SquaredReLU, false, false}, {kernels.SiLU, true, true}, {kernels.SquaredReLU, false, true}, {kernels.GELUTanh, false, true}} {
		t.Run(fmt.Sprintf("act%d/gated=%v/bias=%v", c.act, c.gated, c.bias), func(t *testing.T) {
			f1 := f
			if c.gated {
				f1 = 2 * f
			}
			o := MLPOptions{Act: c.act, Gated: c.gated}
			run := func(grouped bool) (y, dx []float32, dw [][]float32) {
				tape := autograd.NewTape(context.Background())
				x := autograd.NewLeaf(tensor.FromSlice(randn(1, n*h, 1), n, h), "x", true)
				w := testExperts(len(counts), f1, h, f, c.bias)
				out := runMLP(tape, grouped, x, w, counts, o)
				loss := autograd.WeightedSum(tape, autograd.View(tape, out, n*h), tensor.FromSlice(randn(3, n*h, 1), n*h))
				if err := autograd.Backward(tape, loss, nil); err != nil {
					t.Fatal(err)
				}
				return out.Value.Data(), x.Grad.Data(), gradsOf(w)
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
					t.Errorf("parameter %d: gradients differ by %.2g", i, numtest.RelNorm(gdw[i], sdw[i]))
				}
			}
		})
	}
}

// TestOmitFC2Bias checks MLPOptions.OmitFC2Bias on both MLPs: the output
// plus b2 is the biased output bit for bit (the bias is its last
// addition), and every parameter's gradient is bit for bit the one with
// the bias added.
func TestOmitFC2Bias(t *testing.T) {
	const h, f = 8, 6
	counts := []int{3, 0, 5, 1}
	n := 9
	for _, grouped := range []bool{true, false} {
		run := func(omit bool) (y []float32, dw [][]float32, w Experts) {
			tape := autograd.NewTape(context.Background())
			x := autograd.NewLeaf(tensor.FromSlice(randn(1, n*h, 1), n, h), "x", true)
			w = testExperts(len(counts), f, h, f, true)
			out := runMLP(tape, grouped, x, w, counts, MLPOptions{Act: kernels.GELUTanh, OmitFC2Bias: omit})
			loss := autograd.WeightedSum(tape, autograd.View(tape, out, n*h), tensor.FromSlice(randn(3, n*h, 1), n*h))
			if err := autograd.Backward(tape, loss, nil); err != nil {
				t.Fatal(err)
			}
			return out.Value.Data(), gradsOf(w), w
		}
		with, dwith, w := run(false)
		without, dwithout, _ := run(true)
		row := 0
		for j, k := range counts {
			b2 := w.B2[j].Value.Data()
			for range k {
				for i := range h {
					if got, want := without[row*h+i]+b2[i], with[row*h+i]; got != want {
						t.Fatalf("grouped=%v: row %d, column %d: %v without b2 plus b2, %v with it", grouped, row, i, got, want)
					}
				}
				row++
			}
		}
		for i := range dwith {
			numtest.SameBits(t, fmt.Sprintf("grouped=%v: parameter %d's gradient without b2", grouped, i), dwithout[i], dwith[i])
		}
	}
}

// testExperts draws e experts' weights (fc1 [f1, h], fc2 [h, f]) and, with
// bias, their biases.
func testExperts(e, f1, h, f int, bias bool) Experts {
	param := func(name string, seed uint64, shape ...int) *autograd.Var {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := autograd.NewLeaf(tensor.FromSlice(randn(seed, n, 0.3), shape...), name, true)
		v.MarkParameter()
		return v
	}
	var w Experts
	for j := range e {
		w.W1 = append(w.W1, param("w1", uint64(10+j), f1, h))
		w.W2 = append(w.W2, param("w2", uint64(20+j), h, f))
		if bias {
			w.B1 = append(w.B1, param("b1", uint64(30+j), f1))
			w.B2 = append(w.B2, param("b2", uint64(40+j), h))
		}
	}
	return w
}

// runMLP applies GroupedMLP or SequentialMLP.
func runMLP(tape *autograd.Tape, grouped bool, x *autograd.Var, w Experts, counts []int, o MLPOptions) *autograd.Var {
	if grouped {
		return GroupedMLP(tape, x, w, counts, o)
	}
	return SequentialMLP(tape, x, w, counts, o)
}

// gradsOf returns every parameter's gradient, expert by expert (zeros for
// none).
func gradsOf(w Experts) [][]float32 {
	var out [][]float32
	for j := range w.W1 {
		ps := []*autograd.Var{w.W1[j], w.W2[j]}
		if w.B1 != nil {
			ps = append(ps, w.B1[j], w.B2[j])
		}
		for _, p := range ps {
			if p.Grad == nil {
				out = append(out, make([]float32, p.Value.Len()))
			} else {
				out = append(out, p.Grad.Data())
			}
		}
	}
	return out
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
