// Package gradcheck checks a differentiable operation against a float64
// reference: the forward output against the reference's, and each input's
// gradient against central finite differences of the reference in float64.
package gradcheck

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
)

// Case describes one check.
type Case struct {
	// Inputs are the float32 inputs; Grad[i] says whether input i is checked.
	Inputs []*tensor.Tensor
	Grad   []bool
	// Op builds the operation under test on the tape.
	Op func(t *autograd.Tape, in []*autograd.Var) *autograd.Var
	// Ref computes the same function in float64 from the inputs (flattened,
	// row-major) and returns the flattened output.
	Ref func(in [][]float64) []float64
	// Tol is the tolerance on max|got−want| / (1 + max|want|) for outputs and
	// gradients; 0 means 1e-4.
	Tol float64
	// Step is the finite-difference step; 0 means 1e-4 (the reference is
	// float64, so the truncation error is O(Step²)).
	Step float64
	// Seed seeds the random upstream gradient.
	Seed uint64
}

// Check runs the case and returns a description of the first mismatch.
func Check(c Case) error {
	tol, h := c.Tol, c.Step
	if tol == 0 {
		tol = 1e-4
	}
	if h == 0 {
		h = 1e-4
	}
	tape := autograd.NewTape(context.Background())
	vars := make([]*autograd.Var, len(c.Inputs))
	ref := make([][]float64, len(c.Inputs))
	for i, x := range c.Inputs {
		vars[i] = autograd.NewLeaf(x.Clone(), fmt.Sprintf("in%d", i), i < len(c.Grad) && c.Grad[i])
		ref[i] = to64(x.Contiguous().Data())
	}
	out := c.Op(tape, vars)
	if err := tape.Err(); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	want := c.Ref(ref)
	got := out.Value.Contiguous().Data()
	if err := compare("output", got, want, tol); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(c.Seed, 7))
	dy := tensor.New(out.Value.Shape()...)
	dyd := dy.Data()
	for i := range dyd {
		dyd[i] = float32(r.NormFloat64())
	}
	if err := autograd.Backward(tape, out, dy); err != nil {
		return fmt.Errorf("backward: %w", err)
	}
	for i, v := range vars {
		if !v.RequiresGrad() {
			continue
		}
		fd := make([]float64, len(ref[i]))
		for k := range ref[i] {
			orig := ref[i][k]
			ref[i][k] = orig + h
			fp := c.Ref(ref)
			ref[i][k] = orig - h
			fm := c.Ref(ref)
			ref[i][k] = orig
			var s float64
			for j := range fp {
				s += float64(dyd[j]) * (fp[j] - fm[j]) / (2 * h)
			}
			fd[k] = s
		}
		var g []float32
		if v.Grad != nil {
			g = v.Grad.Contiguous().Data()
		} else {
			g = make([]float32, len(fd))
		}
		if err := compare(fmt.Sprintf("gradient of input %d", i), g, fd, tol); err != nil {
			return err
		}
	}
	return nil
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func compare(what string, got []float32, want []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	var scale, worst float64
	at := -1
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
		if d := math.Abs(float64(got[i]) - want[i]); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if at >= 0 && (worst/(1+scale) > tol || math.IsNaN(worst)) {
		return fmt.Errorf("%s: element %d = %g, want %g (max |diff| %.3g, tolerance %.3g × (1+%.3g))", what, at, got[at], want[at], worst, tol, scale)
	}
	return nil
}

// Randn returns a tensor of the given shape with N(0, std²) entries from a
// seeded generator.
func Randn(seed uint64, std float64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 11))
	t := tensor.New(shape...)
	d := t.Data()
	for i := range d {
		d[i] = float32(r.NormFloat64() * std)
	}
	return t
}
