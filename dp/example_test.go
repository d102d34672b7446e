package dp_test

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// Two data-parallel ranks (goroutines of this process) hold the same
// parameter w and see different inputs x; the loss is Σ w·x, so each
// rank's gradient is its own x. With overlap_grad_reduce, the grad hook
// starts the all-reduce as soon as backward has w's gradient;
// FinishGradSync waits for it. Every rank ends with the mean of the two
// gradients, as one rank training on both inputs would.
func ExampleDDP() {
	cfg := config.DefaultDDPConfig()
	cfg.OverlapGradReduce = true
	grads := make([][]float32, 2)
	err := local.NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		w := nn.NewParameter("w", tensor.FromSlice([]float32{0.5, -1, 2}, 3))
		d, err := dp.New([]*nn.Parameter{w}, cfg, dp.Options{Group: g, BucketSize: config.NoBucketing})
		if err != nil {
			return err
		}
		r := float32(g.Rank())
		x := tensor.FromSlice([]float32{1 + r, 2 + r, 3 + r}, 3)
		tape := autograd.NewTape(ctx)
		if err := autograd.Backward(tape, autograd.WeightedSum(tape, w.Var, x), nil); err != nil {
			return err
		}
		if err := d.FinishGradSync(ctx, false); err != nil {
			return err
		}
		grads[g.Rank()] = w.Grad.Data()
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("rank 0's gradient:", grads[0])
	fmt.Println("rank 1's gradient:", grads[1])
	// Output:
	// rank 0's gradient: [1.5 2.5 3.5]
	// rank 1's gradient: [1.5 2.5 3.5]
}
