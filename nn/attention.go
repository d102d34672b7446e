package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/dnnl"
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
	return CausalAttentionIn(tensor.Float32, t, qkv, heads, dropout, g)
}

// CausalAttentionIn is CausalAttention with its GEMMs in precision d, as a
// model with d parameters runs them: for a 16-bit d, Q, K, V, the
// probabilities P, dO and dS are rounded to d before their GEMMs, which
// accumulate in float32 (bfloat16 on oneDNN); the scores, the softmax and
// its backward stay float32. Only the rounded Q, K, V are kept for
// backward (2 bytes per element instead of 4).
func CausalAttentionIn(d tensor.DType, t *autograd.Tape, qkv *autograd.Var, heads int, dropout float32, g *rng.RNG) *autograd.Var {
	return Attention(t, qkv, heads, AttentionOptions{DType: d, Dropout: dropout, RNG: g})
}

// AttentionOptions configure Attention.
type AttentionOptions struct {
	// DType is the precision of the GEMMs (CausalAttentionIn); 0 means
	// float32.
	DType tensor.DType
	// Dropout is the attention dropout probability; RNG gives one seed per
	// call when it is > 0 and the tape is recording.
	Dropout float32
	RNG     *rng.RNG
	// Keys, when set, make the dropout counter-based instead of drawn from
	// RNG (AttentionKeys).
	Keys *AttentionKeys
	// Segments, when not nil, number the documents of every batch row,
	// [b, s] row-major (data.Batch.Segments, --reset-attention-mask):
	// query i of row r attends to key j ≤ i only when
	// Segments[r, j] = Segments[r, i]. The other scores are −Inf before
	// the softmax (probability 0, no gradient). Nil: causal attention over
	// the whole row, computed exactly as without the field.
	Segments []int32
}

// AttentionKeys key counter-based attention dropout (kernels.DropoutAt):
// the probabilities of batch row r and head h are the stream Key(r, h),
// element (query i, key j) its counter i·Seq + j, with i and j places in
// the whole sequence of Seq tokens. A caller that keys by the row's sample
// and the head's place among all heads draws the same masks under any
// split of the rows, the heads or the sequence (cp.Attention's blocks).
type AttentionKeys struct {
	Key func(row, head int) uint64
	Seq int
}

// Attention is CausalAttention with its options: the GEMMs' precision,
// dropout and the document mask of packed sequences. A bfloat16
// attention's GEMMs run natively or on widened values as dnnl.Plan says
// for small GEMMs (its blocks are 64 rows).
func Attention(t *autograd.Tape, qkv *autograd.Var, heads int, o AttentionOptions) *autograd.Var {
	widen := false
	if o.DType == tensor.BFloat16 {
		plan, err := dnnl.Plan()
		widen = err != nil || plan.Small == dnnl.Widened
	}
	return attention(t, qkv, heads, o, widen)
}

// attention is Attention with the bfloat16 path given: widened or native.
func attention(t *autograd.Tape, qkv *autograd.Var, heads int, o AttentionOptions, widen bool) *autograd.Var {
	if o.DType == 0 {
		o.DType = tensor.Float32
	}
	if !t.Recording() {
		o.Dropout = 0 // evaluation: no dropout
	}
	f := &attentionFn{heads: heads, p: o.Dropout, dtype: o.DType, seg: o.Segments, wide: o.DType == tensor.BFloat16 && widen, keys: o.Keys}
	if o.Dropout > 0 && o.Keys == nil {
		f.seed = o.RNG.Uint64()
	}
	return autograd.Apply(t, f, qkv)
}

type attentionFn struct {
	heads int
	p     float32
	seed  uint64
	dtype tensor.DType // the GEMMs' precision
	// wide runs a bfloat16 attention's GEMMs on float32 copies of its
	// bfloat16 values, widened as each (row, head)'s operands are packed:
	// where dnnl.Plan found the native kernel slower for small GEMMs. The
	// saved operands stay bfloat16.
	wide bool
	seg  []int32 // [b, s] segment ids, or nil
	keys *AttentionKeys
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
	if f.seg != nil && len(f.seg) != st.b*st.s {
		return nil, fmt.Errorf("nn: attention: %d segment ids for %d batch rows of %d positions", len(f.seg), st.b, st.s)
	}
	if f.keys != nil && f.p > 0 && f.keys.Seq != st.s {
		return nil, fmt.Errorf("nn: attention: dropout keyed over %d positions, and the sequence has %d", f.keys.Seq, st.s)
	}
	st.lse = make([]float32, st.b*st.n*st.s)
	out := tensor.Empty(st.s, st.b, st.n*st.d)
	s, d := st.s, st.d
	ldq, ldo := st.b*st.n*3*d, st.b*st.n*d
	scale := AttentionScale(d)
	x = f.operand(c.Tape().Workers(), x)
	od := out.Data()
	pairs := st.b * st.n
	parallelRows(pairs, split(c, pairs, s*s), func(_, lo, hi int) {
		p := make([]float32, s*s)
		var mask []byte
		if f.p > 0 {
			mask = make([]byte, s*s)
		}
		pg := f.newGEMMScratch(s)
		qkvBuf := f.newOperand(s * 3 * d)
		for k := lo; k < hi; k++ {
			bi, head := k/st.n, k%st.n
			q := f.at(x, st.qkvOffset(bi, head)).packRows(qkvBuf, s, 3*d, ldq)
			causalScores(p, q, q.at(d), s, d, 3*d)
			f.mask(p, bi, s)
			kernels.CausalSoftmaxForward(p, s, s, scale, st.lse[k*s:(k+1)*s])
			if f.p > 0 {
				f.dropout(p, mask, k)
			}
			causalRowsTimes(od[st.outOffset(bi, head):], ldo, pg.lower(f.dtype, p, s), q.at(2*d), 3*d, s, d)
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
	scale := AttentionScale(d)
	dx := tensor.Empty(x.Shape()...)
	dqkv := dx.Data()
	dO := f.operand(c.Tape().Workers(), dy.Contiguous())
	pairs := st.b * st.n
	parallelRows(pairs, split(c, pairs, s*s), func(_, lo, hi int) {
		p := make([]float32, s*s)
		dp := make([]float32, s*s)
		var mask []byte
		var pd []float32
		if f.p > 0 {
			mask = make([]byte, s*s)
			pd = make([]float32, s*s)
		}
		pg := f.newGEMMScratch(s)
		qkvBuf, doBuf := f.newOperand(s*3*d), f.newOperand(s*d)
		lq := 3 * d // the packed rows' stride
		for k := lo; k < hi; k++ {
			bi, head := k/st.n, k%st.n
			off := st.qkvOffset(bi, head)
			dq := dqkv[off:] // this pair's dQ, dK, dV columns, row stride ldq
			q := f.at(x, off).packRows(qkvBuf, s, lq, ldq)
			do := f.at(dO, st.outOffset(bi, head)).packRows(doBuf, s, d, ldo)
			causalScores(p, q, q.at(d), s, d, lq)
			f.mask(p, bi, s)
			kernels.CausalSoftmaxRecompute(p, s, s, scale, st.lse[k*s:(k+1)*s])
			// dP' = dO·Vᵀ, where P' is the (dropped-out) matrix multiplying V.
			causalScores(dp, do, q.at(2*d), s, d, d, lq)
			if f.p > 0 {
				// dV = P'ᵀ·dO with P' = P⊙mask/(1−p); then dP = dP'⊙mask/(1−p).
				copy(pd, p)
				f.dropout(pd, mask, k)
				causalColsTimes(dq[2*d:], ldq, pg.lower(f.dtype, pd, s), do, d, s, d)
				kernels.DropoutBackward(dp, dp, mask, f.p)
			} else {
				causalColsTimes(dq[2*d:], ldq, pg.lower(f.dtype, p, s), do, d, s, d)
			}
			kernels.SoftmaxBackwardRows(dp, p, dp, s, s, scale)
			// dQ = dS·K, dK = dSᵀ·Q.
			ds := pg.lower(f.dtype, dp, s)
			causalRowsTimes(dq, ldq, ds, q.at(d), lq, s, d)
			causalColsTimes(dq[d:], ldq, ds, q, lq, s, d)
		}
	})
	return []*tensor.Tensor{dx}, nil
}

// mask sets the scores p (s×s) of batch row bi's queries for keys of
// another segment to −Inf (nothing without segments).
func (f *attentionFn) mask(p []float32, bi, s int) {
	if f.seg != nil {
		seg := f.seg[bi*s : (bi+1)*s]
		kernels.SegmentMask(p, s, s, s, 0, seg, seg)
	}
}

// causalBlock is the row-block size of the causal GEMMs: blocks of rows
// [r0, r0+causalBlock) only touch key columns [0, r0+causalBlock), which
// skips about half of the s×s products above the diagonal.
const causalBlock = 64

// causalScores sets the lower-triangle blocks of the s×s matrix p (row
// stride s) to A·Bᵀ, for A and B s×d with row strides lda (and ldb, if
// given; else lda). Entries strictly above the diagonal's blocks are left
// untouched: the softmax kernels never read them.
func causalScores(p []float32, a, b operand, s, d, lda int, ldb ...int) {
	lb := lda
	if len(ldb) > 0 {
		lb = ldb[0]
	}
	for r0 := 0; r0 < s; r0 += causalBlock {
		r1 := min(s, r0+causalBlock)
		gemm(false, true, r1-r0, r1, d, a.at(r0*lda), lda, b, lb, p[r0*s:], s)
	}
}

// causalRowsTimes sets out (s×d, row stride ldo) to P·B for a lower-
// triangular s×s P (row stride s) and B s×d (row stride ldb), by row
// blocks that only read P's columns up to the block's end.
func causalRowsTimes(out []float32, ldo int, p, b operand, ldb, s, d int) {
	for r0 := 0; r0 < s; r0 += causalBlock {
		r1 := min(s, r0+causalBlock)
		gemm(false, false, r1-r0, d, r1, p.at(r0*s), s, b, ldb, out[r0*ldo:], ldo)
	}
}

// causalColsTimes sets out (s×d, row stride ldo) to Pᵀ·B for a lower-
// triangular s×s P (row stride s) and B s×d (row stride ldb): output rows
// [c0, c1) read only P's rows from c0 down.
func causalColsTimes(out []float32, ldo int, p, b operand, ldb, s, d int) {
	for c0 := 0; c0 < s; c0 += causalBlock {
		c1 := min(s, c0+causalBlock)
		gemm(true, false, c1-c0, d, s-c0, p.at(c0*s+c0), s, b.at(c0*ldb), ldb, out[c0*ldo:], ldo)
	}
}

// dropout applies inverted dropout to the s×s matrix p of (row, head)
// pair k: counter-based under keys (element (i, j) is counter i·s + j of
// the pair's stream), else drawn from a generator seeded by
// splitmix64(seed+k).
func (f *attentionFn) dropout(p []float32, mask []byte, k int) {
	if f.keys != nil {
		kernels.DropoutAt(p, mask, p, f.p, f.keys.Key(k/f.heads, k%f.heads), 0)
		return
	}
	kernels.Dropout(p, mask, p, f.p, rng.New(rng.SplitMix64(f.seed+uint64(k))))
}

// StateBytes reports the log-sum-exp rows attention keeps for backward
// (autograd's activation-memory accounting).
func (st attentionState) StateBytes() int64 { return 4 * int64(cap(st.lse)) }
