package kernels

import (
	"fmt"
	"math"
)

// Causal attention softmax over one head's s×s score matrix, stored row-major with row
// stride ld ≥ s (so a head can be a column block of a larger matrix). Row i attends to
// columns 0..i; columns i+1..s−1 are masked and written as zeros. Scores are raw (QKᵀ);
// the kernels apply the softmax scale themselves (1/sqrt(head_dim) in the GPT).

// checkSquare panics unless p can hold s rows of stride ld and lse (if non-nil) s values.
func checkSquare(op, name string, p []float32, ld, s int) {
	if s < 0 || ld < s {
		panic(fmt.Sprintf("kernels.%s: s = %d, ld = %d: want 0 ≤ s ≤ ld", op, s, ld))
	}
	if s > 0 && len(p) < (s-1)*ld+s {
		panic(fmt.Sprintf("kernels.%s: len(%s) = %d, want ≥ (s−1)·ld + s = %d for s = %d, ld = %d",
			op, name, len(p), (s-1)*ld+s, s, ld))
	}
}

// CausalSoftmaxForward turns p's raw scores into causal attention probabilities in place:
// for each row i,
//
//	lse[i]  = log Σ_{j≤i} exp(scale·p[i,j])       (natural log of the scaled scores)
//	p[i,j]  = exp(scale·p[i,j] − lse[i])  for j ≤ i,   0 for i < j < s
//
// computed stably: m = max_{j≤i} scale·p[i,j], e_j = exp(scale·p[i,j] − m), and
// p[i,j] = e_j·(1/Σe) with the sum accumulated in float64; lse[i] = m + log Σe. lse,
// of length s, is saved for [CausalSoftmaxRecompute]. One exponential per element.
//
// p is overwritten in place; lse must not overlap it. Panics if p cannot hold the s×s block
// with stride ld or len(lse) ≠ s (programmer bugs).
func CausalSoftmaxForward(p []float32, ld int, s int, scale float32, lse []float32) {
	const op = "CausalSoftmaxForward"
	checkSquare(op, "p", p, ld, s)
	needLen(op, "lse", len(lse), s, "s")
	for i := range lse {
		row := p[i*ld : i*ld+s]
		live := row[:i+1]
		m := maxScaled(live, scale)
		if math.IsInf(float64(m), 0) || m != m {
			// Every score −Inf (or a +Inf/NaN score): no finite normalizer exists.
			lse[i] = m
			for j := range live {
				live[j] = float32(math.NaN())
			}
			clear(row[i+1:])
			continue
		}
		sum := expAffine(live, live, scale, m, 1)
		lse[i] = float32(float64(m) + math.Log(sum))
		Scale(live, float32(1/sum))
		clear(row[i+1:])
	}
}

// CausalSoftmaxRecompute turns p's raw scores into the probabilities of
// [CausalSoftmaxForward] from the saved lse, without the max pass:
//
//	e_j    = exp(scale·p[i,j] − lse[i])
//	p[i,j] = e_j · (1/Σ_{k≤i} e_k)  for j ≤ i,   0 for i < j < s
//
// The sum (≈ 1, accumulated in float64) removes lse's float32 rounding from the result, which
// agrees with the forward's probabilities to about 2 ulp, not bitwise. This is the recompute
// of the backward of memory-saving attention. Panics if the shapes do not fit (a programmer
// bug).
func CausalSoftmaxRecompute(p []float32, ld, s int, scale float32, lse []float32) {
	const op = "CausalSoftmaxRecompute"
	checkSquare(op, "p", p, ld, s)
	needLen(op, "lse", len(lse), s, "s")
	for i, l := range lse {
		row := p[i*ld : i*ld+s]
		live := row[:i+1]
		sum := expAffine(live, live, scale, l, 1)
		Scale(live, float32(1/sum))
		clear(row[i+1:])
	}
}

// SoftmaxBackwardRows is the gradient of the causal softmax with respect to the raw scores:
// with probabilities p and their gradient dp (both s×s, stride ld), for each row i,
//
//	ds[i,j] = scale · p[i,j] · (dp[i,j] − Σ_{k≤i} p[i,k]·dp[i,k])   for j ≤ i
//	ds[i,j] = 0                                                     for i < j < s
//
// The row sum is accumulated in float64, the rest is float32. ds may alias dp exactly (the
// usual in-place use); it must not alias p. Panics if the shapes do not fit (a programmer
// bug).
func SoftmaxBackwardRows(ds, p, dp []float32, ld, s int, scale float32) {
	const op = "SoftmaxBackwardRows"
	checkSquare(op, "ds", ds, ld, s)
	checkSquare(op, "p", p, ld, s)
	checkSquare(op, "dp", dp, ld, s)
	for i := 0; i < s; i++ {
		pr := p[i*ld : i*ld+i+1]
		dpr := dp[i*ld : i*ld+i+1]
		dpr = dpr[:len(pr)]
		d, ok := dotWideSIMD(pr, dpr)
		if !ok {
			d = dotWide(pr, dpr)
		}
		dsr := ds[i*ld : i*ld+s]
		live := dsr[:len(pr)]
		if !softmaxGradRowSIMD(live, pr, dpr, scale, d) {
			for j, pv := range pr {
				live[j] = scale * pv * (dpr[j] - d)
			}
		}
		clear(dsr[i+1:])
	}
}

// dotWide returns float32(Σ_j float64(a[j])·float64(b[j])) for len(b) = len(a), accumulated in
// float64 (two interleaved partial sums; eight lanes on the vector paths). The products are
// exact in float64.
func dotWide(a, b []float32) float32 {
	b = b[:len(a)]
	var d0, d1 float64
	j := 0
	for ; j+2 <= len(a); j += 2 {
		u, v := a[j:j+2:j+2], b[j:j+2:j+2]
		d0 += float64(u[0]) * float64(v[0])
		d1 += float64(u[1]) * float64(v[1])
	}
	if j < len(a) {
		d0 += float64(a[j]) * float64(b[j])
	}
	return float32(d0 + d1)
}
