package nn

import (
	"fmt"
	"math"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
)

// CausalAttention is the attention core of a GPT layer (Megatron's
// core_attention with a causal mask), fused.
//
// Input qkv [s, b, n·3·d] is linear_qkv's output in Megatron's layout: for
// each of the n heads, d query, d key and d value columns (head0.q, head0.k,
// head0.v, head1.q, ...). Output [s, b, n·d], head-major, ready for
// linear_proj. For each (batch row, head):
//
//	P = softmax(Q·Kᵀ/√d + causal mask)   (fp32)
//	O = dropout(P)·V
//
// Memory: no (batch, head)'s s×s probabilities outlive its own loop
// iteration. Forward keeps only the log-sum-exp of each score row
// ([b, n, s]); backward recomputes P from Q, K and the log-sum-exp, as
// FlashAttention does (Dao et al. 2022, arXiv 2205.14135 §3.1). The cost is
// one extra s×s×d GEMM per (row, head) in backward.
//
// Attention dropout, when p > 0 and the tape is recording, draws one 64-bit seed from g per call; the
// mask of (row, head) k comes from a generator seeded by splitmix64(seed+k),
// so backward regenerates it and the result does not depend on how the
// pairs are spread over workers.
func CausalAttention(t *autograd.Tape, qkv *autograd.Var, heads int, dropout float32, g *rng.RNG) *autograd.Var {
	if !t.Recording() {
		dropout = 0 // evaluation: no dropout
	}
	f := &attentionFn{heads: heads, p: dropout}
	if dropout > 0 {
		f.seed = g.Uint64()
	}
	return autograd.Apply(t, f, qkv)
}

type attentionFn struct {
	heads int
	p     float32
	seed  uint64
}

type attentionState struct {
	s, b, n, d int
	lse        []float32 // [b, n, s]
}

// qkvOffset and outOffset locate (batch row bi, head hi) within a sequence
// position's row of qkv and of the output.
func (st attentionState) qkvOffset(bi, hi int) int { return bi*st.n*3*st.d + hi*3*st.d }
func (st attentionState) outOffset(bi, hi int) int { return bi*st.n*st.d + hi*st.d }

func (f *attentionFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	if x.Rank() != 3 || x.Dim(2)%(3*f.heads) != 0 {
		return nil, fmt.Errorf("nn: attention: qkv %v is not [s, b, heads·3·head_dim] with %d heads", x.Shape(), f.heads)
	}
	st := attentionState{s: x.Dim(0), b: x.Dim(1), n: f.heads, d: x.Dim(2) / (3 * f.heads)}
	st.lse = make([]float32, st.b*st.n*st.s)
	out := tensor.New(st.s, st.b, st.n*st.d)
	s, d := st.s, st.d
	ldq, ldo := st.b*st.n*3*d, st.b*st.n*d
	scale := float32(1 / math.Sqrt(float64(d)))
	qkv, od := x.Data(), out.Data()
	pairs := st.b * st.n
	parallelRows(pairs, split(c, pairs, s*s), func(_, lo, hi int) {
		p := make([]float32, s*s)
		var mask []byte
		if f.p > 0 {
			mask = make([]byte, s*s)
		}
		for k := lo; k < hi; k++ {
			bi, head := k/st.n, k%st.n
			q := qkv[st.qkvOffset(bi, head):]
			blas.Sgemm(false, true, s, s, d, 1, q, ldq, q[d:], ldq, 0, p, s)
			kernels.CausalSoftmaxForward(p, s, s, scale, st.lse[k*s:(k+1)*s])
			if f.p > 0 {
				dropoutRows(p, mask, s, f.p, f.seed, k)
			}
			blas.Sgemm(false, false, s, d, s, 1, p, s, q[2*d:], ldq, 0, od[st.outOffset(bi, head):], ldo)
		}
	})
	if c.Recording() {
		c.Save(x)
		c.State = st
	}
	return out, nil
}

func (f *attentionFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	st := c.State.(attentionState)
	s, d := st.s, st.d
	ldq, ldo := st.b*st.n*3*d, st.b*st.n*d
	scale := float32(1 / math.Sqrt(float64(d)))
	dx := tensor.New(x.Shape()...)
	qkv, dqkv, dod := x.Data(), dx.Data(), dy.Data()
	pairs := st.b * st.n
	parallelRows(pairs, split(c, pairs, s*s), func(_, lo, hi int) {
		p := make([]float32, s*s)
		dp := make([]float32, s*s)
		var mask []byte
		if f.p > 0 {
			mask = make([]byte, s*s)
		}
		for k := lo; k < hi; k++ {
			bi, head := k/st.n, k%st.n
			off := st.qkvOffset(bi, head)
			q, dq := qkv[off:], dqkv[off:]
			do := dod[st.outOffset(bi, head):]
			blas.Sgemm(false, true, s, s, d, 1, q, ldq, q[d:], ldq, 0, p, s)
			kernels.CausalSoftmaxRecompute(p, s, s, scale, st.lse[k*s:(k+1)*s])
			// dP' = dO·Vᵀ, where P' is the (dropped-out) matrix multiplying V.
			blas.Sgemm(false, true, s, s, d, 1, do, ldo, q[2*d:], ldq, 0, dp, s)
			if f.p > 0 {
				// dV = P'ᵀ·dO with P' = P⊙mask/(1−p); then dP = dP'⊙mask/(1−p).
				pd := make([]float32, s*s)
				copy(pd, p)
				dropoutRows(pd, mask, s, f.p, f.seed, k)
				blas.Sgemm(true, false, s, d, s, 1, pd, s, do, ldo, 0, dq[2*d:], ldq)
				kernels.DropoutBackward(dp, dp, mask, f.p)
			} else {
				blas.Sgemm(true, false, s, d, s, 1, p, s, do, ldo, 0, dq[2*d:], ldq)
			}
			kernels.SoftmaxBackwardRows(dp, p, dp, s, s, scale)
			// dQ = dS·K, dK = dSᵀ·Q.
			blas.Sgemm(false, false, s, d, s, 1, dp, s, q[d:], ldq, 0, dq, ldq)
			blas.Sgemm(true, false, s, d, s, 1, dp, s, q, ldq, 0, dq[d:], ldq)
		}
	})
	return []*tensor.Tensor{dx}, nil
}

// dropoutRows applies inverted dropout to the s×s matrix p of (row, head)
// pair k, drawing the mask from a generator seeded by splitmix64(seed+k).
func dropoutRows(p []float32, mask []byte, s int, prob float32, seed uint64, k int) {
	g := rng.New(rng.SplitMix64(seed + uint64(k)))
	kernels.Dropout(p, mask, p, prob, g)
}
