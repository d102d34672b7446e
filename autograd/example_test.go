package autograd_test

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
)

// square is a Function: y = x², whose backward is dx = 2·x·dy. Forward
// saves what backward needs, only while the tape records.
type square struct{}

func (square) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	y := tensor.New(x.Shape()...)
	for i, v := range x.Data() {
		y.Data()[i] = v * v
	}
	if c.Recording() {
		c.Save(x)
	}
	return y, nil
}

func (square) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	dx := tensor.New(x.Shape()...)
	for i, v := range x.Data() {
		dx.Data()[i] = 2 * v * dy.Data()[i]
	}
	return []*tensor.Tensor{dx}, nil
}

// A leaf x, a Function applied to it, a sum, and the backward pass:
// x.Grad holds d(Σ x² + 3·x)/dx = 2x + 3, and the grad hook ran once the
// pass had all of x's gradient (what data-parallel training starts its
// reductions from).
func Example() {
	tape := autograd.NewTape(context.Background())
	x := autograd.NewLeaf(tensor.FromSlice([]float32{1, 2, 3}, 3), "x", true)
	x.AddGradHook(func(_ context.Context, v *autograd.Var) { fmt.Println("hook: gradient of", v.Name, "complete") })

	y := autograd.Add(tape, autograd.Apply(tape, square{}, x), autograd.Scale(tape, x, 3))
	if err := autograd.Backward(tape, autograd.Sum(tape, y), nil); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("x.Grad =", x.Grad.Data())
	// Output:
	// hook: gradient of x complete
	// x.Grad = [5 7 9]
}
