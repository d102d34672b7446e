package tp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/tensor/blas"
)

// BenchmarkLinearBackward times the backward of
// LinearWithGradAccumulationAndAsyncAllreduce on 2 in-process ranks, one
// core each, with the input-gradient collective overlapping the
// weight-gradient GEMM ("overlap") and waited for before it ("serial",
// LinearOptions.SerialComm). "allreduce" is a column-parallel layer's
// backward (all-reduce of dX), "sp" the sequence-parallel one (all-gather
// of X, reduce-scatter of dX). Rank 0's backward is timed; the forward is
// not. Shapes: x [s=128, b=2, in=1024] (under SP [64, 2, 1024]), W [1024,
// 1024] per rank.
//
//	go test ./tp -run '^$' -bench LinearBackward -benchtime 20x
func BenchmarkLinearBackward(b *testing.B) {
	const s, bs, in, outPerRank, n = 128, 2, 1024, 1024, 2
	blas.SetThreads(1)
	b.Logf("BLAS kernel: %s", blas.Kernel())
	for _, sp := range []bool{false, true} {
		for _, serial := range []bool{false, true} {
			mode := "allreduce"
			if sp {
				mode = "sp"
			}
			how := "overlap"
			if serial {
				how = "serial"
			}
			b.Run(fmt.Sprintf("%s/%s", mode, how), func(b *testing.B) {
				benchLinearBackward(b, n, s, bs, in, outPerRank, LinearOptions{AllreduceDgrad: !sp, SequenceParallel: sp, SerialComm: serial})
			})
		}
	}
}

func benchLinearBackward(b *testing.B, n, s, bs, in, outPerRank int, opts LinearOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.StopTimer()
	b.ResetTimer()
	err := local.NewWorld(n, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		tape := autograd.NewTape(ctx)
		r := g.Rank()
		rows := s
		if opts.SequenceParallel {
			rows = s / n
		}
		opts := opts
		opts.Group = g
		x := autograd.NewLeaf(randn(uint64(1+r), 1, rows, bs, in), "x", true)
		w := autograd.NewLeaf(randn(uint64(10+r), 0.03, outPerRank, in), "w", true)
		dy := randn(uint64(20+r), 1, s, bs, outPerRank)
		for i := 0; i < b.N; i++ {
			y := LinearWithGradAccumulationAndAsyncAllreduce(tape, x, w, nil, opts)
			if err := g.Barrier(ctx); err != nil {
				return err
			}
			if r == 0 {
				b.StartTimer()
			}
			if err := autograd.Backward(tape, y, dy); err != nil {
				return err
			}
			if r == 0 {
				b.StopTimer()
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
