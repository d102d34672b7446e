package dp

import (
	"context"
	"fmt"
	"math"
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

// TestFinalizeEmbeddingCopiesOnOneRank: a rank holding both copies of the
// tied word embedding (the V placement's rank 0) gives each the sum of
// the two, bit for bit what the embedding group's all-reduce over two
// ranks holding one copy each gives, in float32 and in bf16.
func TestFinalizeEmbeddingCopiesOnOneRank(t *testing.T) {
	for _, d := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		grad := func(copy, i int) float32 { return float32(copy*7+i) * 0.3711 }
		fill := func(p *nn.Parameter, copy int) {
			x := tensor.New(5)
			for i := range x.Data() {
				x.Data()[i] = grad(copy, i)
			}
			p.Grad = x
			if d != tensor.Float32 {
				p.Grad = tensor.ToHalf(x, d)
			}
		}
		param := func(copy int) *nn.Parameter {
			p := nn.NewParameter(fmt.Sprint("word_embeddings.", copy), tensor.New(5))
			fill(p, copy)
			return p
		}
		// Serial reference: the two copies on two ranks of a group.
		want := make([][]float32, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := local.NewWorld(2, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
			p := param(g.Rank())
			if err := FinalizeModelGrads(ctx, nil, FinalizeOptions{Embedding: g, EmbeddingParams: []*nn.Parameter{p}}); err != nil {
				return err
			}
			want[g.Rank()] = p.Grad.Float32().Data()
			return nil
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		both := []*nn.Parameter{param(0), param(1)}
		if err := FinalizeModelGrads(context.Background(), nil, FinalizeOptions{EmbeddingParams: both}); err != nil {
			t.Fatal(err)
		}
		for i, p := range both {
			got := p.Grad.Float32().Data()
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) {
					t.Errorf("%v, copy %d, element %d: %v, the group's all-reduce gives %v", d, i, j, got[j], want[i][j])
				}
			}
		}
	}
}
