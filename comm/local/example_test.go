package local_test

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// Four ranks all-reduce their rank numbers, then split into two
// tensor-parallel pairs and gather within each pair.
func ExampleWorld_Run() {
	w := local.NewWorld(4, comm.Options{})
	out := make([]string, 4)
	err := w.Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		x := []float32{float32(g.Rank())}
		if err := g.AllReduce(ctx, comm.F32(x), comm.Sum); err != nil {
			return err
		}
		tp, err := g.NewSubgroups(ctx, "tp", [][]int{{0, 1}, {2, 3}})
		if err != nil {
			return err
		}
		mine := []int64{int64(10 * g.Rank())}
		both := make([]int64, tp.Size())
		if err := tp.AllGather(ctx, comm.I64(both), comm.I64(mine)); err != nil {
			return err
		}
		out[g.Rank()] = fmt.Sprintf("rank %d: sum %v, tp rank %d of %v gathered %v", g.Rank(), x[0], tp.Rank(), tp.GlobalRanks(), both)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0: sum 6, tp rank 0 of [0 1] gathered [0 10]
	// rank 1: sum 6, tp rank 1 of [0 1] gathered [0 10]
	// rank 2: sum 6, tp rank 0 of [2 3] gathered [20 30]
	// rank 3: sum 6, tp rank 1 of [2 3] gathered [20 30]
}
