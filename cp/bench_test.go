package cp_test

import (
	"context"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/nn"
)

// BenchmarkAttention4096 times one forward and backward of causal
// attention over a 4096-token sequence (8 heads of 32, one row) on one
// worker: the fused one-rank kernel (nn.CausalAttention) against the
// blockwise kernel context parallelism runs, here on one rank (one causal
// block).
func BenchmarkAttention4096(b *testing.B) {
	const s, heads, d = 4096, 8, 32
	qkv := randn(1, s, 1, heads*3*d)
	dy := randn(2, s, 1, heads*d)
	run := func(b *testing.B, attend func(t *autograd.Tape, x *autograd.Var) *autograd.Var) {
		for b.Loop() {
			tape := autograd.NewTape(context.Background())
			tape.SetWorkers(1)
			x := autograd.NewLeaf(qkv, "qkv", true)
			if err := autograd.Backward(tape, attend(tape, x), dy); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("fused", func(b *testing.B) {
		run(b, func(t *autograd.Tape, x *autograd.Var) *autograd.Var { return nn.CausalAttention(t, x, heads, 0, nil) })
	})
	b.Run("blockwise", func(b *testing.B) {
		run(b, func(t *autograd.Tape, x *autograd.Var) *autograd.Var { return cp.Attention(t, x, heads, cp.Options{}) })
	})
}
