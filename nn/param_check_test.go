package nn

import (
	"context"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
)

// A weight that is the output of another operation would silently lose its
// gradient (it is accumulated into the weight directly): it is an error.
func TestLinearRejectsNonLeafWeight(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	w := autograd.NewLeaf(tensor.New(3, 2), "w", true)
	x := autograd.NewLeaf(tensor.New(4, 2), "x", true)
	Linear(tape, x, autograd.View(tape, w, 3, 2), nil)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "output of another operation") {
		t.Fatalf("got %v, want an error about a non-leaf weight", err)
	}
}

func TestLinearRejectsStridedGrad(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	w := autograd.NewLeaf(tensor.New(3, 2), "w", true)
	w.Grad = tensor.New(2, 3).Transpose(0, 1)
	x := autograd.NewLeaf(tensor.New(4, 2), "x", true)
	Linear(tape, x, w, nil)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "non-contiguous gradient") {
		t.Fatalf("got %v, want an error about a strided gradient", err)
	}
}
