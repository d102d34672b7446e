package tp

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// TestGatherPartitionedInvertsInit: the partitions InitializeAffineWeightCPU
// gives each rank, gathered, are the master weight; PartitionOf gives each
// rank its partition back.
func TestGatherPartitionedInvertsInit(t *testing.T) {
	for _, ws := range []int{1, 2, 4} {
		for _, c := range []struct{ dim, stride int }{{0, 1}, {1, 1}, {0, 3}, {1, 2}} {
			t.Run(fmt.Sprintf("tp%d/dim%d/stride%d", ws, c.dim, c.stride), func(t *testing.T) {
				out, in := 24, 16
				master := randn(7, 1, out, in)
				init := func(m *tensor.Tensor) { m.CopyFrom(master) }
				runRanks(t, ws, func(ctx context.Context, g comm.Group, _ *autograd.Tape) error {
					shape := []int{out, in}
					shape[c.dim] /= ws
					p := nn.NewParameter("w", tensor.New(shape...))
					p.TensorModelParallel, p.PartitionDim, p.PartitionStride = true, c.dim, c.stride
					if _, err := InitializeAffineWeightCPU(p.Value, out, in, shape[c.dim], c.dim, init, c.stride, g.Rank(), ws, false); err != nil {
						return err
					}
					full, err := GatherPartitioned(ctx, g, p, p.Value)
					if err != nil {
						return err
					}
					if !slices.Equal(full.Shape(), []int{out, in}) {
						return fmt.Errorf("gathered %v", full.Shape())
					}
					for i, v := range full.Contiguous().Data() {
						if v != master.Data()[i] {
							return fmt.Errorf("rank %d: gathered element %d is %v, master %v", g.Rank(), i, v, master.Data()[i])
						}
					}
					back, err := PartitionOf(p, master, g.Rank(), ws)
					if err != nil {
						return err
					}
					for i, v := range back.Data() {
						if v != p.Value.Data()[i] {
							return fmt.Errorf("rank %d: partition element %d is %v, want %v", g.Rank(), i, v, p.Value.Data()[i])
						}
					}
					return nil
				})
			})
		}
	}
}

func TestPartitionOfShapeError(t *testing.T) {
	p := nn.NewParameter("decoder.w", tensor.New(4, 3))
	p.TensorModelParallel, p.PartitionDim = true, 0
	if _, err := PartitionOf(p, tensor.New(4, 3), 0, 2); err == nil {
		t.Fatal("a master of the wrong shape was accepted")
	}
}
