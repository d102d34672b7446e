package comm

import (
	"fmt"
	"testing"
)

// BenchmarkReduce measures the in-place two-input float32 sum that a
// 2-rank all-reduce runs on each half of its buffers.
func BenchmarkReduce(b *testing.B) {
	for _, size := range []int{512 << 10, 8 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			x, y := make([]float32, size/4), make([]float32, size/4)
			bufs := []Buffer{F32(x), F32(y)}
			b.SetBytes(int64(size))
			for range b.N {
				Reduce(Sum, bufs, bufs)
			}
		})
	}
}
