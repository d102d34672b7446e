package nn

import (
	"math"

	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
)

// AttentionBlock is one rectangular block of blockwise attention for one
// (batch row, head): M query rows against N key rows of head dimension D,
// query row i seeing key j iff j ≤ i + Offset (0: the causal diagonal
// block; ≥ N−1: no mask). Context-parallel attention splits a sequence's
// attention into such blocks and merges their outputs by log-sum-exp
// (kernels.MergeAttention):
//
//	Forward:  S = Q·Kᵀ,  P = softmax_live(Scale·S) with lse,  O = dropout(P)·V
//	Backward: P = exp(Scale·S − lse_row),  dV += P'ᵀ·dO,  dP = dO·Vᵀ (⊙ mask),
//	          dS = Scale·P⊙(dP − δ),  dQ += dS·K,  dK += dSᵀ·Q
//
// where lse_row is the whole row's log-sum-exp over every block and δ = rowsum(dO⊙O) of the
// whole row's output (FlashAttention's backward, Dao et al. 2022, arXiv 2205.14135 App. B).
//
// GEMMs run in float32 on the BLAS. For a 16-bit DType the caller passes Q, K, V and dO
// already rounded to it, and the block rounds P and dS before their GEMMs, as
// CausalAttentionIn's operands are rounded; the softmax and its backward stay float32.
//
// Dropout (probability Dropout > 0) draws the block's M×N mask from a generator seeded by
// rng.SplitMix64(Seed), or with Keys set counter-based at the block's places in the whole
// sequence, so backward regenerates it.
//
// With QSeg and KSeg set (the segment ids of the M query and N key rows, --reset-attention-mask),
// query i also sees key j only when QSeg[i] = KSeg[j] (kernels.SegmentMask): the masked
// scores get probability 0 and no gradient, and a row left with no key has lse −Inf and
// output 0, as a row with no live key.
type AttentionBlock struct {
	M, N, D    int
	Offset     int
	Scale      float32
	DType      tensor.DType
	Dropout    float32
	Seed       uint64
	QSeg, KSeg []int32
	// Keys, when set, make the dropout counter-based (AttentionKeys): the
	// block's row i is query Q0+i of the whole sequence, its column j key
	// K0+j, and its mask that of stream Key (Seed is then unused).
	Keys   *AttentionKeys
	Key    uint64
	Q0, K0 int
}

// BlockScratch is a worker's scratch for AttentionBlock of up to M×N.
type BlockScratch struct {
	p, dp, pr []float32
	h         []uint16
	mask      []byte
}

// NewBlockScratch returns scratch for blocks of up to m×n.
func NewBlockScratch(m, n int, d tensor.DType, dropout bool) *BlockScratch {
	s := &BlockScratch{p: make([]float32, m*n), dp: make([]float32, m*n)}
	if d != tensor.Float32 {
		s.pr, s.h = make([]float32, m*n), make([]uint16, m*n)
	}
	if dropout {
		s.mask = make([]byte, m*n)
		if s.pr == nil {
			s.pr = make([]float32, m*n)
		}
	}
	return s
}

// live returns the columns of rows [r0, r1) the block's GEMMs compute: up to the last row's
// live columns (rows are cut into causalBlock-row slabs so a causal block skips about half).
func (a AttentionBlock) live(r1 int) int { return kernels.BlockLive(r1-1, a.N, a.Offset) }

// scores sets the live slabs of s.p (M×N, row stride N) to Q·Kᵀ, the scores of keys in
// another segment to −Inf.
func (a AttentionBlock) scores(s *BlockScratch, q []float32, ldq int, k []float32, ldk int) {
	for r0 := 0; r0 < a.M; r0 += causalBlock {
		r1 := min(a.M, r0+causalBlock)
		if n := a.live(r1); n > 0 {
			blas.Sgemm(false, true, r1-r0, n, a.D, 1, q[r0*ldq:], ldq, k, ldk, 0, s.p[r0*a.N:], a.N)
		}
	}
	if a.QSeg != nil {
		kernels.SegmentMask(s.p, a.N, a.M, a.N, a.Offset, a.QSeg, a.KSeg)
	}
}

// rounded returns x (M×N) with its values rounded to the block's DType in dst (x itself in
// float32).
func (a AttentionBlock) rounded(s *BlockScratch, dst, x []float32) []float32 {
	if a.DType == tensor.Float32 {
		return x
	}
	n := a.M * a.N
	tensor.RoundInto(a.DType, s.h[:n], x[:n])
	tensor.WidenInto(a.DType, dst[:n], s.h[:n])
	return dst
}

// dropped returns P' = P⊙mask/(1−p) in s.pr, regenerating the block's mask (P itself
// without dropout).
func (a AttentionBlock) dropped(s *BlockScratch) []float32 {
	if a.Dropout == 0 {
		return s.p
	}
	n := a.M * a.N
	if a.Keys != nil {
		for i := range a.M {
			lo, hi := i*a.N, (i+1)*a.N
			kernels.DropoutAt(s.pr[lo:hi], s.mask[lo:hi], s.p[lo:hi], a.Dropout, a.Key, uint64((a.Q0+i)*a.Keys.Seq+a.K0))
		}
		return s.pr
	}
	kernels.Dropout(s.pr[:n], s.mask[:n], s.p[:n], a.Dropout, rng.New(rng.SplitMix64(a.Seed)))
	return s.pr
}

// Forward sets o (M×D, row stride ldo) to the block's normalised output and lse (M) to its
// rows' log-sum-exp (−Inf for a row that sees no key, whose output is 0). q is M×D, k and v
// are N×D, with row strides ldq, ldk, ldv.
func (a AttentionBlock) Forward(s *BlockScratch, q []float32, ldq int, k []float32, ldk int, v []float32, ldv int, o []float32, ldo int, lse []float32) {
	a.scores(s, q, ldq, k, ldk)
	kernels.BlockSoftmaxForward(s.p, a.N, a.M, a.N, a.Offset, a.Scale, lse)
	p := a.dropped(s)
	pr := a.rounded(s, s.pr, p)
	for r0 := 0; r0 < a.M; r0 += causalBlock {
		r1 := min(a.M, r0+causalBlock)
		n := a.live(r1)
		if n == 0 {
			for r := r0; r < r1; r++ {
				clear(o[r*ldo : r*ldo+a.D])
			}
			continue
		}
		blas.Sgemm(false, false, r1-r0, a.D, n, 1, pr[r0*a.N:], a.N, v, ldv, 0, o[r0*ldo:], ldo)
	}
}

// Backward adds the block's gradients to dq (M×D), dk and dv (N×D), given dO (M×D), the
// rows' log-sum-exp over every block (lse) and δ = rowsum(dO⊙O) of their whole output
// (delta). Strides as in Forward.
func (a AttentionBlock) Backward(s *BlockScratch, q []float32, ldq int, k []float32, ldk int, v []float32, ldv int,
	do []float32, lddo int, lse, delta []float32, dq []float32, lddq int, dk []float32, lddk int, dv []float32, lddv int) {
	a.scores(s, q, ldq, k, ldk)
	kernels.BlockSoftmaxRecompute(s.p, a.N, a.M, a.N, a.Offset, a.Scale, lse)
	// dP' = dO·Vᵀ (P' the dropped-out matrix that multiplied V).
	for r0 := 0; r0 < a.M; r0 += causalBlock {
		r1 := min(a.M, r0+causalBlock)
		if n := a.live(r1); n > 0 {
			blas.Sgemm(false, true, r1-r0, n, a.D, 1, do[r0*lddo:], lddo, v, ldv, 0, s.dp[r0*a.N:], a.N)
		}
	}
	// dV += P'ᵀ·dO.
	a.colsTimes(dv, lddv, a.rounded(s, s.pr, a.dropped(s)), do, lddo)
	if a.Dropout > 0 {
		kernels.DropoutBackward(s.dp[:a.M*a.N], s.dp[:a.M*a.N], s.mask[:a.M*a.N], a.Dropout)
	}
	kernels.BlockSoftmaxBackward(s.dp, s.p, s.dp, a.N, a.M, a.N, a.Offset, a.Scale, delta)
	ds := a.rounded(s, s.pr, s.dp)
	// dQ += dS·K.
	for r0 := 0; r0 < a.M; r0 += causalBlock {
		r1 := min(a.M, r0+causalBlock)
		if n := a.live(r1); n > 0 {
			blas.Sgemm(false, false, r1-r0, a.D, n, 1, ds[r0*a.N:], a.N, k, ldk, 1, dq[r0*lddq:], lddq)
		}
	}
	// dK += dSᵀ·Q.
	a.colsTimes(dk, lddk, ds, q, ldq)
}

// colsTimes adds Pᵀ·B to out (N×D, row stride ldo) for the block's M×N matrix p and B M×D
// (row stride ldb): key rows [c0, c1) are live from query row c0 − Offset on.
func (a AttentionBlock) colsTimes(out []float32, ldo int, p, b []float32, ldb int) {
	for c0 := 0; c0 < a.N; c0 += causalBlock {
		c1 := min(a.N, c0+causalBlock)
		r0 := min(a.M, max(0, c0-a.Offset))
		if r0 == a.M {
			continue
		}
		blas.Sgemm(true, false, c1-c0, a.D, a.M-r0, 1, p[r0*a.N+c0:], a.N, b[r0*ldb:], ldb, 1, out[c0*ldo:], ldo)
	}
}

// AttentionScale returns the softmax scale 1/√d of head dimension d.
func AttentionScale(d int) float32 { return float32(1 / math.Sqrt(float64(d))) }
