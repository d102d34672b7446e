package optim

import (
	"math"
	"testing"

	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// TestMixedPrecisionStep: Adam on 16-bit parameters updates float32 main
// parameters exactly as on a float32 copy, rounds them into the model,
// reads a float32 gradient in place and widens a 16-bit one, unscales and
// detects a non-finite gradient, and counts the main parameters as state.
func TestMixedPrecisionStep(t *testing.T) {
	vals := []float32{0.1, -0.25, 1.5, 3.1, -2.2, 0.0078125}
	grads := []float32{0.5, -1, 0.25, 2, -0.125, 1e-3}
	cfg := AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decoupled: true}
	for _, d := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, halfGrad := range []bool{false, true} {
			// The float32 reference starts from the rounded values.
			start := tensor.ToHalf(tensor.FromSlice(append([]float32(nil), vals...), 2, 3), d)
			ref := nn.NewParameter("w.weight", start.Float32())
			ref.Grad = tensor.FromSlice(append([]float32(nil), grads...), 2, 3)
			if halfGrad {
				ref.Grad = tensor.ToHalf(ref.Grad, d).Float32()
			}
			p := nn.NewParameter("w.weight", start.Clone())
			p.Grad = tensor.FromSlice(append([]float32(nil), grads...), 2, 3)
			if halfGrad {
				p.Grad = tensor.ToHalf(p.Grad, d)
			}
			want, got := NewAdam([]*nn.Parameter{ref}, cfg), NewAdam([]*nn.Parameter{p}, cfg)
			if n := got.StateElements(); n != 3*6 {
				t.Errorf("%v: %d state elements, want 18 (two moments and the main parameters)", d, n)
			}
			for step := 0; step < 3; step++ {
				got.CopyGradsToMain()
				if got.UnscaleAndCheck(0.5) {
					t.Fatalf("%v: a finite gradient reported as non-finite", d)
				}
				want.Segments[0].Param.Grad.Scale(0.5)
				if err := want.Step(toyHyper); err != nil {
					t.Fatal(err)
				}
				if err := got.Step(toyHyper); err != nil {
					t.Fatal(err)
				}
				// The float32 reference's gradient was unscaled in place; undo for the next step.
				want.Segments[0].Param.Grad.Scale(2)
				if halfGrad != (got.Segments[0].MainGrad != nil) {
					t.Fatalf("%v: 16-bit gradient %v but main gradient copy %v", d, halfGrad, got.Segments[0].MainGrad != nil)
				}
				if !halfGrad {
					p.Grad.Scale(2) // unscaled in place, as the float32 buffer is
				}
			}
			main, wantMain := got.Segments[0].Main, ref.Value.Data()
			for i := range main {
				if math.Float32bits(main[i]) != math.Float32bits(wantMain[i]) {
					t.Fatalf("%v half grad %v: main parameter %d = %v, float32 Adam %v", d, halfGrad, i, main[i], wantMain[i])
				}
			}
			model := tensor.ToHalf(tensor.FromSlice(main, 2, 3), d).Bits()
			for i, b := range p.Value.Bits() {
				if b != model[i] {
					t.Fatalf("%v: model element %d = %#04x, want the rounded main parameter %#04x", d, i, b, model[i])
				}
			}
		}
	}
	// A 16-bit gradient that overflowed is found.
	p := nn.NewParameter("w.weight", tensor.ToHalf(tensor.Full(1, 4), tensor.Float16))
	p.Grad = tensor.ToHalf(tensor.FromSlice([]float32{1, 70000, 2, 3}, 4), tensor.Float16)
	o := NewAdam([]*nn.Parameter{p}, cfg)
	o.CopyGradsToMain()
	if !o.UnscaleAndCheck(1) {
		t.Error("a float16 gradient of +Inf (70000 rounded) was not reported")
	}
}
