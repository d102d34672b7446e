package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gotron/gotron/tensor/blas"
)

// mediumShapes are the float32 GEMMs of one layer of the medium benchmark
// model (2048 tokens, hidden 512) and its output layer (vocabulary 8192), as
// name, m, n, k, transA, transB.
var mediumShapes = []struct {
	name    string
	m, n, k int
	ta, tb  bool
}{
	{"qkv", 2048, 1536, 512, false, true},
	{"qkv-dx", 2048, 512, 1536, false, false},
	{"qkv-dw", 1536, 512, 2048, true, false},
	{"fc1", 2048, 2048, 512, false, true},
	{"fc2", 2048, 512, 2048, false, true},
	{"logits", 2048, 8192, 512, false, true},
	{"logits-dw", 8192, 512, 2048, true, false},
}

// BenchmarkGemmThreads runs the medium model's GEMMs as GemmParallel does on
// one and two workers (oneDNN), as one single-threaded OpenBLAS call, split
// over two goroutines each calling OpenBLAS (gemmSplit, the build without
// oneDNN), and on OpenBLAS's own two threads, and reports GFLOP/s (2·m·n·k
// per call).
func BenchmarkGemmThreads(b *testing.B) {
	defer blas.SetThreads(blas.Threads())
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(rows, cols int) *Tensor {
		x := New(rows, cols)
		for i := range x.Data() {
			x.Data()[i] = float32(r.NormFloat64())
		}
		return x
	}
	for _, s := range mediumShapes {
		ar, ac := s.m, s.k
		if s.ta {
			ar, ac = ac, ar
		}
		br, bc := s.k, s.n
		if s.tb {
			br, bc = bc, br
		}
		a, bm, c := fill(ar, ac), fill(br, bc), New(s.m, s.n)
		flops := 2 * float64(s.m*s.n*s.k)
		run := func(name string, f func()) {
			b.Run(fmt.Sprintf("%s/%s", s.name, name), func(b *testing.B) {
				for b.Loop() {
					f()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		blas.SetThreads(1)
		run("workers=1", func() { GemmParallel(1, s.ta, s.tb, 1, a, bm, 0, c) })
		run("workers=2", func() { GemmParallel(2, s.ta, s.tb, 1, a, bm, 0, c) })
		run("openblas", func() { sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, bm, 0, c) })
		run("openblas-split2", func() { gemmSplit(2, s.ta, s.tb, 1, a, bm, 0, c) })
		blas.SetThreads(2)
		run("openblas-threads2", func() { sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, bm, 0, c) })
		blas.SetThreads(1)
	}
}
