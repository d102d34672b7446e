//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

// The benchmarks run on every rank at once, so every rank must run the same
// number of iterations: run them with a fixed count, -test.benchtime=Nx
// (run_tests.sh does). Bytes per second are the buffer's size over the
// time of one operation (NCCL's "algorithm bandwidth").

var benchSizesMB = []int{1, 16, 128}

// BenchmarkAllReduce is gotron's AllReduce (MPI moves, comm.Reduce adds in
// rank order) of a float32 buffer, Sum.
func BenchmarkAllReduce(b *testing.B) {
	for _, mb := range benchSizesMB {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			benchWorld(b, mb, func(ctx context.Context, g comm.Group, buf []float32) error {
				return g.AllReduce(ctx, comm.F32(buf), comm.Sum)
			})
		})
	}
}

// BenchmarkAllReduceBF16 is AllReduce of a bfloat16 buffer of the same
// byte size (twice the elements).
func BenchmarkAllReduceBF16(b *testing.B) {
	for _, mb := range benchSizesMB {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			var h []uint16
			benchWorld(b, mb, func(ctx context.Context, g comm.Group, buf []float32) error {
				if h == nil {
					h = make([]uint16, 2*len(buf))
					for i := range h {
						h[i] = comm.F32ToBF16(float32(i%7) / 8)
					}
				}
				return g.AllReduce(ctx, comm.BF16(h), comm.Sum)
			})
		})
	}
}

// BenchmarkNativeAllReduce is MPI_Iallreduce(MPI_SUM) itself, whose
// summation order is MPI's choice, for comparison.
func BenchmarkNativeAllReduce(b *testing.B) {
	for _, mb := range benchSizesMB {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			benchWorld(b, mb, func(ctx context.Context, g comm.Group, buf []float32) error {
				return g.(*group).nativeAllReduce(ctx, buf)
			})
		})
	}
}

// BenchmarkLatency is the time of one small collective (ns/collective; a
// float32 Sum all-reduce of 8 elements): gotron's AllReduce (header exchange,
// all-to-all, all-gather), MPI_Iallreduce itself, and gotron's Barrier
// (the header exchange alone).
func BenchmarkLatency(b *testing.B) {
	small := func(op func(context.Context, comm.Group, []float32) error) func(*testing.B) {
		return func(b *testing.B) {
			err := runWorld(b, comm.Options{Timeout: time.Minute}, func(ctx context.Context, g comm.Group) error {
				const inner = 200 // collectives per iteration: -benchtime stays small
				buf := make([]float32, 8)
				b.ResetTimer()
				for range b.N * inner {
					if err := op(ctx, g, buf); err != nil {
						return err
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*inner), "ns/collective")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("AllReduce", small(func(ctx context.Context, g comm.Group, buf []float32) error {
		return g.AllReduce(ctx, comm.F32(buf), comm.Sum)
	}))
	b.Run("NativeAllReduce", small(func(ctx context.Context, g comm.Group, buf []float32) error {
		return g.(*group).nativeAllReduce(ctx, buf)
	}))
	b.Run("Barrier", small(func(ctx context.Context, g comm.Group, _ []float32) error {
		return g.Barrier(ctx)
	}))
}

// BenchmarkMemcpy copies a buffer of the same size, on every rank at once:
// the memory-bandwidth yardstick for the all-reduces.
func BenchmarkMemcpy(b *testing.B) {
	for _, mb := range benchSizesMB {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			n := mb << 20 / 4
			src, dst := make([]float32, n), make([]float32, n)
			for i := range src {
				src[i] = float32(i)
			}
			copy(dst, src)
			b.SetBytes(int64(n * 4))
			b.ResetTimer()
			for range b.N {
				copy(dst, src)
			}
		})
	}
}

// benchWorld times op on a float32 buffer of mb MiB in a fresh World.
func benchWorld(b *testing.B, mb int, op func(context.Context, comm.Group, []float32) error) {
	n := mb << 20 / 4
	err := runWorld(b, comm.Options{Timeout: time.Minute}, func(ctx context.Context, g comm.Group) error {
		buf := make([]float32, n)
		for i := range buf {
			buf[i] = float32(i%7) / 8
		}
		if err := op(ctx, g, buf); err != nil { // warm up: fault the pages in
			return err
		}
		b.SetBytes(int64(n * 4))
		b.ResetTimer()
		for range b.N {
			if err := op(ctx, g, buf); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
