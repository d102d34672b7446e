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
	benchmarkAttention(b, func(t *autograd.Tape, in *autograd.Var, heads int) *autograd.Var {
		return nn.CausalAttention(t, in, heads, 0, nil)
	})
}

// BenchmarkCausalAttentionBF16 is BenchmarkCausalAttention with the
// GEMMs in bfloat16, on each path a bfloat16 attention can take: native
// (oneDNN's bfloat16 GEMM) and widened (the float32 BLAS on widened
// values); dnnl.Plan picks one for training.
func BenchmarkCausalAttentionBF16(b *testing.B) {
	for _, path := range []struct {
		name  string
		widen bool
	}{{"native", false}, {"widened", true}} {
		b.Run(path.name, func(b *testing.B) {
			benchmarkAttention(b, func(t *autograd.Tape, in *autograd.Var, heads int) *autograd.Var {
				return nn.AttentionPath(t, in, heads, nn.AttentionOptions{DType: tensor.BFloat16}, path.widen)
			})
		})
	}
}

// benchmarkAttention runs attn forward and backward at the benchmark
// models' shapes.
func benchmarkAttention(b *testing.B, attn func(*autograd.Tape, *autograd.Var, int) *autograd.Var) {
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
				y := attn(tape, in, sh.n)
				if err := autograd.Backward(tape, y, dy); err != nil {
					b.Fatal(err)
				}
			}
			flops := 12 * float64(sh.s*sh.s*sh.d*sh.b*sh.n)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
