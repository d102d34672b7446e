package local

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotron/gotron/comm"
)

// TestAllReduceSharesBlocks checks AllReduce on buffers of many blocks (the
// conformance suite's are smaller than one), with lengths that do not
// divide evenly, against plain serial loops: every element must be reduced
// exactly once, in rank order, whichever rank claims its block. Five ranks
// outnumber the processors, so ranks are descheduled mid-operation and
// their blocks are done by others.
func TestAllReduceSharesBlocks(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const rounds = 2
			lf := 2*(arBlockBytes/4)*n + 1237 // float32 and int64 elements
			lh := (arBlockBytes/2)*n + 77     // bfloat16 elements
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			f32 := make([][][]float32, rounds)
			bf := make([][][]uint16, rounds)
			i64 := make([][][]int64, rounds)
			for r := range rounds {
				f32[r], bf[r], i64[r] = make([][]float32, n), make([][]uint16, n), make([][]int64, n)
				for k := range n {
					f32[r][k] = make([]float32, lf)
					for i := range f32[r][k] {
						f32[r][k][i] = float32(rng.NormFloat64())
					}
					bf[r][k] = make([]uint16, lh)
					for i := range bf[r][k] {
						bf[r][k][i] = comm.F32ToBF16(float32(rng.NormFloat64()))
					}
					i64[r][k] = make([]int64, lf)
					for i := range i64[r][k] {
						i64[r][k][i] = rng.Int64N(1<<40) - 1<<39
					}
				}
			}
			// The references, before the ranks overwrite their inputs.
			wantF32, wantMax, wantBF, wantI64 := make([][]float32, rounds), make([][]float32, rounds), make([][]uint16, rounds), make([][]int64, rounds)
			for r := range rounds {
				wantF32[r], wantMax[r] = make([]float32, lf), make([]float32, lf)
				wantI64[r] = make([]int64, lf)
				for i := range lf {
					s, m, si := f32[r][0][i], f32[r][0][i], i64[r][0][i]
					for k := 1; k < n; k++ {
						s += f32[r][k][i]
						m = max(m, f32[r][k][i])
						si += i64[r][k][i]
					}
					wantF32[r][i], wantMax[r][i], wantI64[r][i] = s, m, si
				}
				wantBF[r] = make([]uint16, lh)
				for i := range lh {
					var s float32
					for k := range n {
						s += comm.BF16ToF32(bf[r][k][i])
					}
					wantBF[r][i] = comm.F32ToBF16(s / float32(n))
				}
			}
			maxes := make([][][]float32, rounds)
			for r := range rounds {
				maxes[r] = make([][]float32, n)
				for k := range n {
					maxes[r][k] = append([]float32(nil), f32[r][k]...)
				}
			}
			err := NewWorld(n, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				k := g.Rank()
				for r := range rounds {
					if err := g.AllReduce(ctx, comm.F32(f32[r][k]), comm.Sum); err != nil {
						return err
					}
					if err := g.AllReduce(ctx, comm.F32(maxes[r][k]), comm.Max); err != nil {
						return err
					}
					if err := g.AllReduce(ctx, comm.BF16(bf[r][k]), comm.Avg); err != nil {
						return err
					}
					if err := g.AllReduce(ctx, comm.I64(i64[r][k]), comm.Sum); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for r := range rounds {
				for k := range n {
					for i := range lf {
						if math.Float32bits(f32[r][k][i]) != math.Float32bits(wantF32[r][i]) {
							t.Fatalf("round %d, rank %d: float32 sum element %d is %g, want %g", r, k, i, f32[r][k][i], wantF32[r][i])
						}
						if maxes[r][k][i] != wantMax[r][i] {
							t.Fatalf("round %d, rank %d: float32 max element %d is %g, want %g", r, k, i, maxes[r][k][i], wantMax[r][i])
						}
						if i64[r][k][i] != wantI64[r][i] {
							t.Fatalf("round %d, rank %d: int64 sum element %d is %d, want %d", r, k, i, i64[r][k][i], wantI64[r][i])
						}
					}
					for i := range lh {
						if bf[r][k][i] != wantBF[r][i] {
							t.Fatalf("round %d, rank %d: bfloat16 avg element %d is %#04x, want %#04x", r, k, i, bf[r][k][i], wantBF[r][i])
						}
					}
				}
			}
		})
	}
}
