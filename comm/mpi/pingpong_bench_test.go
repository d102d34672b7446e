//go:build mpi

package mpi

import (
	"context"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

// pingPongSizes are BenchmarkPingPong's message sizes in bytes, with the
// round trips per benchmark iteration: about 16 MB each way per iteration,
// so that the fixed -test.benchtime=20x of run_tests.sh still times many
// small messages.
var pingPongSizes = []struct {
	name  string
	bytes int
	inner int
}{{"4KB", 4 << 10, 4096}, {"64KB", 64 << 10, 256}, {"1MB", 1 << 20, 16}, {"16MB", 16 << 20, 1}}

// BenchmarkPingPong is the point-to-point latency and bandwidth of the
// backend: world rank 0 Sends a float32 buffer to rank 1 and Recvs it back,
// rank 1 does the opposite, and other ranks wait. ns/roundtrip is the time
// of one round trip; MB/s is the one-way bandwidth (both messages' bytes
// over the time). Pipeline-parallel messages (package pp/p2p) are these
// Sends and Recvs.
func BenchmarkPingPong(b *testing.B) {
	for _, size := range pingPongSizes {
		b.Run(size.name, func(b *testing.B) {
			if worldSize(b) < 2 {
				b.Skip("needs at least 2 ranks: run under mpirun -np 2 (run_tests.sh -bench)")
			}
			err := runWorld(b, comm.Options{Timeout: time.Minute}, func(ctx context.Context, g comm.Group) error {
				buf := make([]float32, size.bytes/4)
				for i := range buf {
					buf[i] = float32(i)
				}
				roundTrip := func() error {
					switch g.Rank() {
					case 0:
						if err := g.Send(ctx, comm.F32(buf), 1); err != nil {
							return err
						}
						return g.Recv(ctx, comm.F32(buf), 1)
					case 1:
						if err := g.Recv(ctx, comm.F32(buf), 0); err != nil {
							return err
						}
						return g.Send(ctx, comm.F32(buf), 0)
					}
					return nil
				}
				if err := roundTrip(); err != nil { // warm up: fault the pages in
					return err
				}
				b.SetBytes(int64(2 * size.bytes * size.inner))
				b.ResetTimer()
				for range b.N * size.inner {
					if err := roundTrip(); err != nil {
						return err
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size.inner), "ns/roundtrip")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkBatchExchange is the pipeline schedules' steady-state message
// pattern (send_forward_recv_backward, pp/p2p): world ranks 0 and 1 each
// issue one BatchP2P of [Isend to the other, Irecv from the other] and
// Wait for it; other ranks wait. ns/exchange is the time of one exchange;
// MB/s counts the bytes each rank sends.
func BenchmarkBatchExchange(b *testing.B) {
	for _, size := range pingPongSizes {
		b.Run(size.name, func(b *testing.B) {
			if worldSize(b) < 2 {
				b.Skip("needs at least 2 ranks: run under mpirun -np 2 (run_tests.sh -bench)")
			}
			err := runWorld(b, comm.Options{Timeout: time.Minute}, func(ctx context.Context, g comm.Group) error {
				if g.Rank() > 1 {
					return nil
				}
				out, in := make([]float32, size.bytes/4), make([]float32, size.bytes/4)
				for i := range out {
					out[i] = float32(i)
				}
				peer := 1 - g.Rank()
				exchange := func() error {
					w, err := g.BatchP2P(ctx, []comm.P2POp{
						{Kind: comm.Isend, Buf: comm.F32(out), Peer: peer},
						{Kind: comm.Irecv, Buf: comm.F32(in), Peer: peer},
					})
					if err != nil {
						return err
					}
					return w.Wait(ctx)
				}
				if err := exchange(); err != nil { // warm up
					return err
				}
				b.SetBytes(int64(size.bytes * size.inner))
				b.ResetTimer()
				for range b.N * size.inner {
					if err := exchange(); err != nil {
						return err
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size.inner), "ns/exchange")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
