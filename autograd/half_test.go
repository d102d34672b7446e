package autograd_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/tensor"
)

// halfULP returns half an ulp of 1 in d: 1 + halfULP is a tie that rounds
// to even (1), 1 + 2·halfULP is the next value.
func halfULP(d tensor.DType) float32 {
	if d == tensor.BFloat16 {
		return float32(math.Ldexp(1, -8))
	}
	return float32(math.Ldexp(1, -11))
}

// A leaf with a 16-bit Grad used twice in one pass gets the float32 sum of
// both contributions, rounded once: 1 + (h + h) = 1 + ulp, where rounding
// after each use would give round(round(1 + h) + h) = 1. Its hook runs once
// and sees the rounded sum; the Grad tensor stays the same 16-bit tensor.
func TestHalfLeafGradRoundsOncePerPass(t *testing.T) {
	for _, d := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		t.Run(d.String(), func(t *testing.T) {
			h := halfULP(d)
			v := autograd.NewLeaf(tensor.New(3), "v", true)
			grad := tensor.ToHalf(tensor.Full(1, 3), d)
			v.Grad = grad
			var seen []float32
			v.AddGradHook(func(_ context.Context, v *autograd.Var) { seen = append(seen, v.Grad.At(0)) })
			tape := autograd.NewTape(context.Background())
			y := autograd.Add(tape, v, v)
			if err := autograd.Backward(tape, y, tensor.Full(h, 3)); err != nil {
				t.Fatal(err)
			}
			if v.Grad != grad || v.Grad.DType() != d {
				t.Fatalf("Grad was replaced (now %v)", v.Grad.DType())
			}
			for i := 0; i < 3; i++ {
				if got := v.Grad.At(i); got != 1+2*h {
					t.Fatalf("Grad[%d] = %v, want 1 + 2·%v = %v", i, got, h, 1+2*h)
				}
			}
			if len(seen) != 1 || seen[0] != 1+2*h {
				t.Fatalf("hook saw %v, want once 1 + 2·%v", seen, h)
			}
		})
	}
}

// Across passes a 16-bit leaf Grad holds round(round(g0 + g1) + g2),
// bitwise, whether it is contiguous or a transposed view of a 16-bit
// buffer (written in place); a Backward on the leaf itself rounds too.
func TestHalfLeafGradAccumulatesAcrossPasses(t *testing.T) {
	g0 := gradcheck.Randn(1, 1, 4, 6)
	g1, g2 := gradcheck.Randn(2, 1, 4, 6), gradcheck.Randn(3, 0.01, 4, 6)
	for _, d := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		want := addRound(addRound(tensor.ToHalf(g0, d), g1, d), g2, d)
		for _, view := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/view=%v", d, view), func(t *testing.T) {
				grad := tensor.ToHalf(g0, d)
				if view {
					grad = tensor.ToHalf(g0.Transpose(0, 1).Contiguous(), d).Transpose(0, 1)
				}
				v := autograd.NewLeaf(tensor.New(4, 6), "v", true)
				v.Grad = grad
				tape := autograd.NewTape(context.Background())
				if err := autograd.Backward(tape, autograd.Scale(tape, v, 1), g1); err != nil {
					t.Fatal(err)
				}
				if err := autograd.Backward(tape, v, g2); err != nil {
					t.Fatal(err)
				}
				if v.Grad != grad {
					t.Fatal("Grad was replaced")
				}
				got, w := grad.Float32().Contiguous().Data(), want.Float32().Data()
				for i := range w {
					if math.Float32bits(got[i]) != math.Float32bits(w[i]) {
						t.Fatalf("element %d = %v, want %v", i, got[i], w[i])
					}
				}
			})
		}
	}
}

// addRound returns round(h + g) in d for a 16-bit h and a float32 g.
func addRound(h, g *tensor.Tensor, d tensor.DType) *tensor.Tensor {
	s := h.Float32().Clone()
	sd, gd := s.Data(), g.Contiguous().Data()
	for i := range sd {
		sd[i] += gd[i]
	}
	return tensor.ToHalf(s, d)
}
