package dnnl

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/kernels"
)

// gptShapes are the GEMMs of a GPT with hidden size 512 on 1024 tokens
// (seq·batch), as m×k×n: the QKV projection, its input gradient, the MLP's
// first layer and its second.
var gptShapes = [][3]int{{1024, 512, 1536}, {1024, 1536, 512}, {1024, 512, 2048}, {1024, 2048, 512}}

// BenchmarkGemm runs C[m×n] = A[m×k]·B[k×n] on dense row-major operands in
// bf16 through GemmBF16, in float32 through GemmF32 and through blas.Sgemm,
// at 1 and 2 threads (the threads argument and blas.SetThreads), and
// reports GFLOP/s (2·m·n·k per call).
func BenchmarkGemm(b *testing.B) {
	defer blas.SetThreads(blas.Threads())
	r := rand.New(rand.NewPCG(5, 6))
	for _, th := range []int{1, 2} {
		for _, s := range gptShapes {
			m, k, n := s[0], s[1], s[2]
			x, y, z := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			for i := range y {
				y[i] = float32(r.NormFloat64())
			}
			xh, yh := make([]uint16, len(x)), make([]uint16, len(y))
			kernels.F32ToBF16(xh, x)
			kernels.F32ToBF16(yh, y)
			name := fmt.Sprintf("threads=%d/m=%d,k=%d,n=%d", th, m, k, n)
			gflops := func(b *testing.B) {
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			}
			b.Run("bf16/"+name, func(b *testing.B) {
				for b.Loop() {
					if err := GemmBF16(false, false, m, n, k, 1, xh, k, yh, n, 0, z, n, th); err != nil {
						b.Fatal(err)
					}
				}
				gflops(b)
			})
			b.Run("float32/"+name, func(b *testing.B) {
				for b.Loop() {
					if err := GemmF32(false, false, m, n, k, 1, x, k, y, n, 0, z, n, th); err != nil {
						b.Fatal(err)
					}
				}
				gflops(b)
			})
			b.Run("float32-openblas/"+name, func(b *testing.B) {
				blas.SetThreads(th)
				for b.Loop() {
					blas.Sgemm(false, false, m, n, k, 1, x, k, y, n, 0, z, n)
				}
				gflops(b)
			})
		}
	}
}

// BenchmarkGemmSmall measures the cost of a call on cached primitives: a
// 1×1×1 GEMM, where the arithmetic is nothing, and 64×64×64.
func BenchmarkGemmSmall(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			x, z := make([]uint16, n*n), make([]float32, n*n)
			for i := range x {
				x[i] = 0x3F80 // bf16 1
			}
			for b.Loop() {
				if err := GemmBF16(false, false, n, n, n, 1, x, n, x, n, 0, z, n, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
