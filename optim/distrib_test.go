package optim

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// TestDistributedOptimizerStateIsSharded measures the optimizer state each
// rank holds under the distributed optimizer at DP 1, 2, 4 and 8: every
// rank holds at most 2·numel/dp values (its shard of each padded bucket,
// two moments) and at least that less the padding (alignment gaps and
// bucket ends), and the ranks together
// hold exactly the unsharded optimizer's 2·Σ parameters. With bfloat16
// parameters the float32 main parameters are sharded alike: 3 values per
// element instead of 2.
func TestDistributedOptimizerStateIsSharded(t *testing.T) {
	for _, d := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		t.Run(d.String(), func(t *testing.T) { testStateSharded(t, d) })
	}
}

func testStateSharded(t *testing.T, dtype tensor.DType) {
	params := func() []*nn.Parameter { // parameters of several sizes, in dtype
		var ps []*nn.Parameter
		for i, shape := range [][]int{{96, 64}, {96}, {40, 96}, {40}, {100, 40}} {
			v := tensor.New(shape...)
			rng.New(uint64(i)).FillNormal(v.Data(), 0, 0.1)
			if dtype != tensor.Float32 {
				v = tensor.ToHalf(v, dtype)
			}
			ps = append(ps, nn.NewParameter(fmt.Sprint("p", i), v))
		}
		return ps
	}
	plain := NewAdam(params(), AdamConfig{}).StateElements()
	per := 2 // state values per element: two moments, and main parameters of 16-bit ones
	if dtype != tensor.Float32 {
		per = 3
	}
	ddp := config.DefaultDDPConfig()
	ddp.UseDistributedOptimizer = true
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint("dp", n), func(t *testing.T) {
			var total atomic.Int64
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := local.NewWorld(n, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
				d, err := dp.New(params(), ddp, dp.Options{Group: g, BucketSize: 3000, ParamDType: dtype})
				if err != nil {
					return err
				}
				o, err := NewDistributedOptimizer([]dp.Wrapper{d}, AdamConfig{})
				if err != nil {
					return err
				}
				l := d.Buffer.Layout
				held := 0
				for _, p := range l.Params {
					held += p.Numel
				}
				// Padding: the 64-element alignment gaps and the bucket ends.
				got, most, pad := o.StateElements(), per*l.Numel/n, per*(l.Numel-held)
				if got > most || got < most-pad {
					t.Errorf("rank %d holds %d state values; 1/%d of the padded buffer's is %d (padding %d)", g.Rank(), got, n, most, pad)
				}
				total.Add(int64(got))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if int(total.Load()) != plain {
				t.Errorf("the ranks hold %d state values together; the unsharded optimizer %d", total.Load(), plain)
			}
		})
	}
}
