package optim

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// TestGradNorm: with NormOwners, a TP-split parameter counts each rank's
// partition, a replicated one counts once; the norm equals the norm of the
// whole model's gradients on one rank.
func TestGradNorm(t *testing.T) {
	full := []float32{3, -1, 4, 1, -5, 9, 2, -6}
	rep := []float32{0.5, -0.25}
	var want float64
	for _, v := range append(append([]float32(nil), full...), rep...) {
		want += float64(v) * float64(v)
	}
	want = math.Sqrt(want)
	for _, n := range []int{1, 2, 4} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := local.NewWorld(n, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
			c := len(full) / n
			split := nn.NewParameter("split", tensor.New(c))
			split.TensorModelParallel, split.PartitionDim = true, 0
			split.Grad = tensor.FromSlice(append([]float32(nil), full[g.Rank()*c:(g.Rank()+1)*c]...), c)
			r := nn.NewParameter("replicated", tensor.New(2))
			r.Grad = tensor.FromSlice(append([]float32(nil), rep...), 2)
			ps := []*nn.Parameter{split, r}
			got, err := GlobalNorm(ctx, NewAdam(ps, AdamConfig{}).SumSquares(NormOwners(ps, g.Rank(), 0)), g)
			if err != nil {
				return err
			}
			if math.Abs(got-want) > 1e-12*want {
				return fmt.Errorf("rank %d of %d: norm %.15g, want %.15g", g.Rank(), n, got, want)
			}
			return nil
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}
