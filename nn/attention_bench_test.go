package nn_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/blas"
)

// BenchmarkCausalAttention runs the attention core forward and backward on
// two workers at the benchmark models' shapes (small: s 256, batch 8, 8
// heads of 32; medium: s 512, batch 4, 8 heads of 64) and reports GFLOP/s
// by the benchmark's formula, 12·s²·d per (batch row, head) for forward and
// backward (the full s×s square; the causal kernels compute about half,
// and backward recomputes the scores).
func BenchmarkCausalAttention(b *testing.B) {
	defer blas.SetThreads(blas.Threads())
	blas.SetThreads(1) // as training runs: the workers are the threads
	for _, sh := range []struct {
		name       string
		s, b, n, d int
	}{{"small", 256, 8, 8, 32}, {"medium", 512, 4, 8, 64}} {
		b.Run(sh.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			x := tensor.New(sh.s, sh.b, sh.n*3*sh.d)
			for i := range x.Data() {
				x.Data()[i] = float32(r.NormFloat64())
			}
			dy := tensor.New(sh.s, sh.b, sh.n*sh.d)
			for i := range dy.Data() {
				dy.Data()[i] = float32(r.NormFloat64())
			}
			for b.Loop() {
				tape := autograd.NewTape(context.Background())
				tape.SetWorkers(2)
				in := autograd.NewLeaf(x, "qkv", true)
				y := nn.CausalAttention(tape, in, sh.n, 0, nil)
				if err := autograd.Backward(tape, y, dy); err != nil {
					b.Fatal(err)
				}
			}
			flops := 12 * float64(sh.s*sh.s*sh.d*sh.b*sh.n)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
