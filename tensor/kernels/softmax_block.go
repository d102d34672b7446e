package kernels

import (
	"fmt"
	"math"
)

// Blockwise attention softmax (ring and all-gather context parallelism): one m×n block of a
// head's scores, m query rows against n key rows, row-major with row stride ld ≥ n. Query
// row i sees key column j iff j ≤ i + offset, so offset 0 is the causal diagonal block,
// offset ≥ n−1 a block with no mask, and a row with i + offset < 0 sees no key. A block is one
// term of a row's softmax; the merge of the blocks' outputs by their log-sum-exp, and the
// backward from the whole row's log-sum-exp, are FlashAttention's (Dao et al. 2022,
// arXiv 2205.14135 §3.1; Liu et al. 2023, arXiv 2310.01889 for the ring).

// BlockLive returns how many leading columns of row i an m×n block with the given causal
// offset leaves unmasked: clamp(i + offset + 1, 0, n).
func BlockLive(i, n, offset int) int { return min(n, max(0, i+offset+1)) }

// checkBlock panics unless p can hold m rows of n columns with row stride ld.
func checkBlock(op, name string, p []float32, ld, m, n int) {
	if m < 0 || n < 0 || ld < n {
		panic(fmt.Sprintf("kernels.%s: m = %d, n = %d, ld = %d: want m, n ≥ 0 and ld ≥ n", op, m, n, ld))
	}
	if m > 0 && n > 0 && len(p) < (m-1)*ld+n {
		panic(fmt.Sprintf("kernels.%s: len(%s) = %d, want ≥ (m−1)·ld + n = %d", op, name, len(p), (m-1)*ld+n))
	}
}

// BlockSoftmaxForward turns p's raw scores into the block's own softmax in place: for each
// row i with live columns j < BlockLive(i, n, offset),
//
//	lse[i]  = log Σ_live exp(scale·p[i,j])
//	p[i,j]  = exp(scale·p[i,j] − lse[i])  live,   0 masked
//
// as CausalSoftmaxForward computes a row (max, one exponential per element, float64 sum).
// A row with no live column, or whose live scores are all −Inf (masked by SegmentMask), gets
// lse[i] = −Inf and zeros: it contributes nothing to a merge. A +Inf or NaN maximum gives NaN.
// Panics if the shapes do not fit (a programmer bug).
func BlockSoftmaxForward(p []float32, ld, m, n, offset int, scale float32, lse []float32) {
	const op = "BlockSoftmaxForward"
	checkBlock(op, "p", p, ld, m, n)
	needLen(op, "lse", len(lse), m, "m")
	for i := range lse {
		row := p[i*ld : i*ld+n]
		k := BlockLive(i, n, offset)
		live := row[:k]
		if k == 0 {
			lse[i] = float32(math.Inf(-1))
			clear(row)
			continue
		}
		mx := maxScaled(live, scale)
		if math.IsInf(float64(mx), -1) {
			// Every live score −Inf (SegmentMask): no key of this block.
			lse[i] = mx
			clear(row)
			continue
		}
		if math.IsInf(float64(mx), 1) || mx != mx {
			lse[i] = mx
			for j := range live {
				live[j] = float32(math.NaN())
			}
			clear(row[k:])
			continue
		}
		sum := expAffine(live, live, scale, mx, 1)
		lse[i] = float32(float64(mx) + math.Log(sum))
		Scale(live, float32(1/sum))
		clear(row[k:])
	}
}

// BlockSoftmaxRecompute turns p's raw scores into the probabilities of the whole row's
// softmax restricted to the block, from the row's log-sum-exp over every block:
//
//	p[i,j] = exp(scale·p[i,j] − lse[i])  live,   0 masked
//
// (no renormalisation: the block holds only part of the row). A row whose lse is −Inf (no
// key anywhere) is zero. Panics if the shapes do not fit (a programmer bug).
func BlockSoftmaxRecompute(p []float32, ld, m, n, offset int, scale float32, lse []float32) {
	const op = "BlockSoftmaxRecompute"
	checkBlock(op, "p", p, ld, m, n)
	needLen(op, "lse", len(lse), m, "m")
	for i, l := range lse {
		row := p[i*ld : i*ld+n]
		k := BlockLive(i, n, offset)
		if math.IsInf(float64(l), -1) {
			k = 0
		}
		live := row[:k]
		expAffine(live, live, scale, l, 1)
		clear(row[k:])
	}
}

// BlockSoftmaxBackward is the gradient of the block's scores given the probabilities p
// (BlockSoftmaxRecompute's), their gradient dp and each row's delta[i] = Σ_j dO[i,j]·O[i,j]
// over the whole row's output (equal to Σ_k p[i,k]·dp[i,k] over every block of the row):
//
//	ds[i,j] = scale · p[i,j] · (dp[i,j] − delta[i])   live,   0 masked
//
// ds may alias dp exactly; it must not alias p. Panics if the shapes do not fit (a
// programmer bug).
func BlockSoftmaxBackward(ds, p, dp []float32, ld, m, n, offset int, scale float32, delta []float32) {
	const op = "BlockSoftmaxBackward"
	checkBlock(op, "ds", ds, ld, m, n)
	checkBlock(op, "p", p, ld, m, n)
	checkBlock(op, "dp", dp, ld, m, n)
	needLen(op, "delta", len(delta), m, "m")
	for i, d := range delta {
		k := BlockLive(i, n, offset)
		pr := p[i*ld : i*ld+k]
		dpr := dp[i*ld : i*ld+k]
		dsr := ds[i*ld : i*ld+n]
		live := dsr[:k]
		if !softmaxGradRowSIMD(live, pr, dpr, scale, d) {
			for j, pv := range pr {
				live[j] = scale * pv * (dpr[j] - d)
			}
		}
		clear(dsr[k:])
	}
}

// MergeAttention folds one block's normalised output ob (m×d, row stride ldb) and
// log-sum-exp lseb into the running output o (row stride ldo) and log-sum-exp lse of the same
// rows, in place:
//
//	l      = log(exp(lse) + exp(lseb))        (as max + log1p(exp(−|lse − lseb|)))
//	o      = o·exp(lse − l) + ob·exp(lseb − l)
//
// A −Inf lseb leaves the row as it is; a −Inf lse takes the block's row. Panics if the
// shapes do not fit (a programmer bug).
func MergeAttention(o []float32, ldo int, lse []float32, ob []float32, ldb int, lseb []float32, d int) {
	const op = "MergeAttention"
	m := len(lse)
	needLen(op, "lseb", len(lseb), m, "len(lse)")
	checkBlock(op, "o", o, ldo, m, d)
	checkBlock(op, "ob", ob, ldb, m, d)
	for i := range m {
		a, b := float64(lse[i]), float64(lseb[i])
		if math.IsInf(b, -1) {
			continue
		}
		orow, brow := o[i*ldo:i*ldo+d], ob[i*ldb:i*ldb+d]
		if math.IsInf(a, -1) {
			copy(orow, brow)
			lse[i] = lseb[i]
			continue
		}
		hi, lo := max(a, b), min(a, b)
		l := hi + math.Log1p(math.Exp(lo-hi))
		wa, wb := float32(math.Exp(a-l)), float32(math.Exp(b-l))
		for j := range orow {
			orow[j] = orow[j]*wa + brow[j]*wb
		}
		lse[i] = float32(l)
	}
}

// RowDots sets delta[i] = Σ_j a[i,j]·b[i,j] for m rows of d values (row strides lda, ldb),
// accumulated in float64: the delta of [BlockSoftmaxBackward] from dO and O.
func RowDots(delta, a []float32, lda int, b []float32, ldb, d int) {
	m := len(delta)
	checkBlock("RowDots", "a", a, lda, m, d)
	checkBlock("RowDots", "b", b, ldb, m, d)
	for i := range m {
		ar, br := a[i*lda:i*lda+d], b[i*ldb:i*ldb+d]
		v, ok := dotWideSIMD(ar, br)
		if !ok {
			v = dotWide(ar, br)
		}
		delta[i] = v
	}
}
