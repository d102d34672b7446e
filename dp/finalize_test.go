package dp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// TestFinalizeSequenceParallelGrads: on a TP group of 2 and 4 ranks, the
// gradients of SequenceParallel parameters become the sum over the TP ranks
// (in rank order, bitwise) on every rank; other gradients are untouched;
// without sequence_parallel nothing is reduced.
func TestFinalizeSequenceParallelGrads(t *testing.T) {
	for _, n := range []int{2, 4} {
		for _, sp := range []bool{true, false} {
			t.Run(fmt.Sprintf("tp%d/sp=%v", n, sp), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				grad := func(rank, p, i int) float32 { return float32(rank*100+p*10+i) * 0.37 }
				err := local.NewWorld(n, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
					ps := []*nn.Parameter{
						nn.NewParameter("ln.weight", tensor.New(3)),
						nn.NewParameter("fc.weight", tensor.New(2, 2)),
						nn.NewParameter("ln.bias", tensor.New(3)),
					}
					ps[0].SequenceParallel, ps[2].SequenceParallel = true, true
					d, err := New(ps, config.DefaultDDPConfig(), Options{BucketSize: config.NoBucketing})
					if err != nil {
						return err
					}
					for pi, p := range ps {
						for i := range p.Grad.Data() {
							p.Grad.Data()[i] = grad(g.Rank(), pi, i)
						}
					}
					if err := FinalizeModelGrads(ctx, []Wrapper{d}, FinalizeOptions{TP: g, SequenceParallel: sp}); err != nil {
						return err
					}
					for pi, p := range ps {
						for i, got := range p.Grad.Data() {
							want := grad(g.Rank(), pi, i)
							if sp && p.SequenceParallel {
								want = 0
								for r := 0; r < n; r++ {
									want += grad(r, pi, i)
								}
							}
							if got != want {
								return fmt.Errorf("rank %d: %s[%d] = %v, want %v", g.Rank(), p.Name, i, got, want)
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
