package local

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotron/gotron/comm"
)

var benchSizes = []int{1 << 20, 16 << 20, 128 << 20}

// BenchmarkAllReduce measures a float32 sum all-reduce of 1, 16 and 128 MB
// on 2 ranks; compare its MB/s with BenchmarkMemcpy's for the same size.
func BenchmarkAllReduce(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			const ranks = 2
			bufs := make([][]float32, ranks)
			for r := range bufs {
				bufs[r] = make([]float32, size/4) // zeros: sums stay finite
			}
			w := NewWorld(ranks, comm.Options{})
			b.SetBytes(int64(size))
			b.ResetTimer()
			err := w.Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				buf := comm.F32(bufs[g.Rank()])
				for range b.N {
					if err := g.AllReduce(ctx, buf, comm.Sum); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkMemcpy measures copy of 1, 16 and 128 MB, the bound an
// all-reduce's bandwidth is judged against.
func BenchmarkMemcpy(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			src, dst := filled(size/4), make([]float32, size/4)
			copy(dst, src)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkMemcpyTwoCores copies the same sizes split over two goroutines:
// the memory bandwidth two cores get, which bounds a 2-rank all-reduce
// (it reads and writes twice the bytes a copy does).
func BenchmarkMemcpyTwoCores(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			src, dst := filled(size/4), make([]float32, size/4)
			copy(dst, src)
			half := len(src) / 2
			b.SetBytes(int64(size))
			b.ResetTimer()
			done := make(chan struct{})
			go func() {
				for range b.N {
					copy(dst[half:], src[half:])
				}
				close(done)
			}()
			for range b.N {
				copy(dst[:half], src[:half])
			}
			<-done
		})
	}
}

// filled returns n float32 with every page written, so that a copy from it
// reads real memory (a never-written slice maps to the kernel's shared zero
// page, and copying from it measures writes only).
func filled(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	return x
}
