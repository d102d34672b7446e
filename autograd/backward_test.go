package autograd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/tensor"
)

func sameFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// scaled returns s·x as a new slice.
func scaled(x []float32, s float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = s * v
	}
	return y
}

func TestBackwardFromInteriorNodeWithExternalGradient(t *testing.T) {
	// Pipeline-style: stage 1 computes h = 3·x; stage 2 receives h as a
	// fresh leaf, computes loss = Σ w⊙(h + h), and sends the leaf's gradient
	// back; stage 1 runs Backward(h, grad). x.Grad must equal the gradient
	// of the whole composition, 6·w.
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(gradcheck.Randn(1, 1, 3, 4), "x", true)
	h := autograd.Scale(tape, x, 3)

	in2 := autograd.NewLeaf(h.Value.Clone(), "stage2.input", true)
	w := gradcheck.Randn(2, 1, 3, 4)
	loss := autograd.WeightedSum(tape, autograd.Add(tape, in2, in2), w)
	if err := autograd.Backward(tape, loss, nil); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(in2.Grad.Data(), scaled(w.Data(), 2)) {
		t.Fatalf("stage 2 input gradient %v, want 2·w", in2.Grad.Data())
	}
	if err := autograd.Backward(tape, h, in2.Grad); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(x.Grad.Data(), scaled(scaled(w.Data(), 2), 3)) {
		t.Fatalf("x gradient %v, want 6·w", x.Grad.Data())
	}
}

func TestBackwardGradientArguments(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(2, 2, 2), "x", true)
	y := autograd.Scale(tape, x, 5)
	if err := autograd.Backward(tape, y, nil); err == nil || !strings.Contains(err.Error(), "scalar output") {
		t.Fatalf("nil gradient for a [2 2] output: err = %v", err)
	}
	if err := autograd.Backward(tape, y, tensor.New(4)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("gradient of the wrong shape: err = %v", err)
	}
	if x.Grad != nil {
		t.Fatal("a rejected Backward touched the leaf")
	}
	// A nil gradient for a one-element output means 1.
	s := autograd.Sum(tape, y)
	if err := autograd.Backward(tape, s, nil); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(x.Grad.Data(), []float32{5, 5, 5, 5}) {
		t.Fatalf("x.Grad = %v, want all 5", x.Grad.Data())
	}
}

func TestBackwardOnALeaf(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.New(3), "x", true)
	calls := 0
	x.AddGradHook(func(context.Context, *autograd.Var) { calls++ })
	g := tensor.FromSlice([]float32{1, 2, 3}, 3)
	if err := autograd.Backward(tape, x, g); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || !sameFloats(x.Grad.Data(), g.Data()) {
		t.Fatalf("leaf Backward: %d hook calls, grad %v", calls, x.Grad.Data())
	}
	g.Data()[0] = 100
	if x.Grad.Data()[0] == 100 {
		t.Fatal("the leaf's Grad aliases the caller's gradient")
	}
	c := autograd.Const(tensor.New(3))
	if err := autograd.Backward(tape, c, g); err != nil || c.Grad != nil {
		t.Fatalf("Backward on a constant: err %v, grad %v", err, c.Grad)
	}
}

func TestExternalGradientIsNotModified(t *testing.T) {
	// The caller's gradient flows through Add and View unchanged into
	// leaves that already hold gradients and into a pending sum.
	tape := autograd.NewTape(t.Context())
	a := autograd.NewLeaf(gradcheck.Randn(1, 1, 2, 3), "a", true)
	b := autograd.NewLeaf(gradcheck.Randn(2, 1, 6), "b", true)
	a.Grad = tensor.Full(1, 2, 3)
	b.Grad = tensor.Full(1, 6)
	h := autograd.Add(tape, a, autograd.View(tape, b, 2, 3))
	y := autograd.Add(tape, h, h)
	dy := gradcheck.Randn(3, 1, 2, 3)
	keep := dy.Clone()
	if err := autograd.Backward(tape, y, dy); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(dy.Data(), keep.Data()) {
		t.Fatal("Backward modified the caller's gradient")
	}
	for i, v := range a.Grad.Data() {
		if want := 1 + (keep.Data()[i] + keep.Data()[i]); v != want {
			t.Fatalf("a.Grad[%d] = %v, want %v", i, v, want)
		}
	}
}

// bufferView returns a contiguous view of n elements at offset off of a
// buffer of size total, filled with 0.5, 1.5, 2.5, ...
func bufferView(total, off int, shape ...int) (buf []float32, view *tensor.Tensor) {
	buf = make([]float32, total)
	for i := range buf {
		buf[i] = float32(i) + 0.5
	}
	n := numel(shape)
	return buf, tensor.FromSlice(buf, total).Narrow(0, off, n).View(shape...)
}

func TestLeafGradAccumulatesIntoExistingView(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	buf, view := bufferView(20, 7, 2, 3)
	x := autograd.NewLeaf(gradcheck.Randn(4, 1, 2, 3), "x", true)
	x.Grad = view
	dy := gradcheck.Randn(5, 1, 2, 3)
	y := autograd.Scale(tape, x, 2)
	if err := autograd.Backward(tape, y, dy); err != nil {
		t.Fatal(err)
	}
	if x.Grad != view {
		t.Fatal("Backward replaced a pre-existing Grad tensor")
	}
	for i, v := range buf {
		want := float32(i) + 0.5
		if i >= 7 && i < 13 {
			want += 2 * dy.Data()[i-7]
		}
		if v != want {
			t.Fatalf("buffer[%d] = %v, want %v", i, v, want)
		}
	}

	// A non-contiguous Grad (a column window of a gradient matrix) is
	// updated in place too.
	big := tensor.Full(1, 3, 5)
	win := big.Narrow(1, 1, 3) // [3, 3]
	z := autograd.NewLeaf(tensor.New(3, 3), "z", true)
	z.Grad = win
	dz := gradcheck.Randn(6, 1, 3, 3)
	if err := autograd.Backward(tape, autograd.Scale(tape, z, 1), dz); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 5; j++ {
			want := float32(1)
			if j >= 1 && j < 4 {
				want += dz.At(i, j-1)
			}
			if got := big.At(i, j); got != want {
				t.Fatalf("strided Grad: big[%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
}

func TestLeafGradAccumulatesAcrossPasses(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(gradcheck.Randn(7, 1, 5), "x", true)
	w1, w2 := gradcheck.Randn(8, 1, 5), gradcheck.Randn(9, 1, 5)
	for _, w := range []*tensor.Tensor{w1, w2} {
		if err := autograd.Backward(tape, autograd.WeightedSum(tape, x, w), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range x.Grad.Data() {
		if want := w1.Data()[i] + w2.Data()[i]; v != want {
			t.Fatalf("x.Grad[%d] = %v after two passes, want %v", i, v, want)
		}
	}
}
