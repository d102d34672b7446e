package p2p_test

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/pp/p2p"
	"github.com/gotron/gotron/tensor"
)

// Three pipeline stages pass an activation forward, each adding its stage
// number, and the gradient back; the messages travel as bfloat16.
func Example() {
	shape := []int{2, 1, 2} // (s, b, h)
	cfg := p2p.ConfigFrom(&config.ModelParallelConfig{PipelineDType: config.BFloat16, BatchP2PComm: true})
	err := local.NewWorld(3, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		c, err := p2p.New(g, cfg)
		if err != nil {
			return err
		}
		x, err := c.RecvForward(ctx, shape, c.IsFirstStage())
		if err != nil {
			return err
		}
		if x == nil { // the first stage makes its input
			x = tensor.FromSlice([]float32{1, 2, 3, 4}, shape...)
		}
		for i := range x.Data() {
			x.Data()[i] += float32(c.Stage())
		}
		// The last stage turns its output into a gradient; the others
		// send the output on and get the gradient back.
		grad := x
		if !c.IsLastStage() {
			if grad, err = c.SendForwardRecvBackward(ctx, x, shape, false); err != nil {
				return err
			}
		} else {
			fmt.Println("stage 2 output:", x.Data())
		}
		if c.IsFirstStage() {
			fmt.Println("stage 0 gradient:", grad.Data())
		}
		return c.SendBackward(ctx, grad, c.IsFirstStage())
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// stage 2 output: [4 5 6 7]
	// stage 0 gradient: [4 5 6 7]
}
