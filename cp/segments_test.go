package cp_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor/rng"
)

// packedSegments returns segment ids [b, s] of rows of packed documents:
// after each position a new document starts with probability eod.
func packedSegments(seed uint64, b, s int, eod float64) []int32 {
	g := rng.New(seed)
	seg := make([]int32, b*s)
	for r := range b {
		var cur int32
		for i := range s {
			seg[r*s+i] = cur
			if g.Float64() < eod {
				cur++
			}
		}
	}
	return seg
}

// naiveAttention is causal attention with a document mask in float64,
// written per element with an explicit mask: for qkv [s, b, heads·3·d]
// (per head q, k, v), key j enters query i's softmax only when j ≤ i and
// seg[bi, j] = seg[bi, i]. It returns the output [s, b, heads·d] and the
// gradient of Σ dy⊙output with respect to qkv.
func naiveAttention(qkv, dy []float32, s, b, heads, d int, seg []int32) (y, dx []float64) {
	w := heads * 3 * d
	at := func(i, bi, h, part, c int) float64 { return float64(qkv[(i*b+bi)*w+h*3*d+part*d+c]) }
	y, dx = make([]float64, s*b*heads*d), make([]float64, len(qkv))
	scale := 1 / math.Sqrt(float64(d))
	p := make([]float64, s)
	for bi := range b {
		for h := range heads {
			for i := range s {
				mask := func(j int) bool { return j <= i && seg[bi*s+j] == seg[bi*s+i] }
				mx := math.Inf(-1)
				for j := range s {
					if !mask(j) {
						continue
					}
					var dot float64
					for c := range d {
						dot += at(i, bi, h, 0, c) * at(j, bi, h, 1, c)
					}
					p[j] = dot * scale
					mx = math.Max(mx, p[j])
				}
				var z float64
				for j := range s {
					if mask(j) {
						p[j] = math.Exp(p[j] - mx)
						z += p[j]
					} else {
						p[j] = 0
					}
				}
				out := y[(i*b+bi)*heads*d+h*d:]
				g := dy[(i*b+bi)*heads*d+h*d:]
				for j := range s {
					p[j] /= z
					for c := range d {
						out[c] += p[j] * at(j, bi, h, 2, c)
					}
				}
				// dP = dO·Vᵀ, dS = P⊙(dP − Σ P⊙dP)·scale, dQ = dS·K, dK = dSᵀ·Q, dV = Pᵀ·dO.
				dp := make([]float64, s)
				var sum float64
				for j := range s {
					for c := range d {
						dp[j] += float64(g[c]) * at(j, bi, h, 2, c)
					}
					sum += p[j] * dp[j]
				}
				for j := range s {
					ds := p[j] * (dp[j] - sum) * scale
					for c := range d {
						dx[(i*b+bi)*w+h*3*d+c] += ds * at(j, bi, h, 1, c)
						dx[(j*b+bi)*w+h*3*d+d+c] += ds * at(i, bi, h, 0, c)
						dx[(j*b+bi)*w+h*3*d+2*d+c] += p[j] * float64(g[c])
					}
				}
			}
		}
	}
	return y, dx
}

func narrow(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// TestAttentionSegmentsMatchReference: context-parallel attention with
// packed documents, every communication type on 2 ranks (the zigzag split
// puts documents across chunks and ranks), equals the naive float64
// attention with the explicit document mask: output and q, k, v gradients
// to 1e-5 relative norm.
func TestAttentionSegmentsMatchReference(t *testing.T) {
	const s, b, heads, d = 24, 2, 2, 4
	seg := packedSegments(1, b, s, 0.15)
	qkv := randn(5, s, b, heads*3*d)
	dy := randn(6, s, b, heads*d)
	wy, wdx := naiveAttention(qkv.Data(), dy.Data(), s, b, heads, d, seg)
	for _, typ := range []cp.CommType{cp.P2P, cp.AllGather, cp.A2A} {
		t.Run(string(typ), func(t *testing.T) {
			y, dx := parallel(t, attnCase{typ: typ, cp: 2, s: s, b: b, heads: heads, d: d, seg: seg}, qkv, dy)
			numtest.CloseNorm(t, "output", y.Data(), narrow(wy), 1e-5)
			numtest.CloseNorm(t, "dq, dk, dv", dx.Data(), narrow(wdx), 1e-5)
		})
	}
}

// TestAttentionSegmentsMatchOneRank: with documents long (spanning chunks
// and ranks) and short (most blocks masked whole and skipped), for every
// communication type on 2 and 4 ranks and chunks longer than the kernels'
// 64-row slabs, the output and the q, k, v gradients gathered back to the
// whole sequence equal the one-rank masked attention's to 1e-6.
func TestAttentionSegmentsMatchOneRank(t *testing.T) {
	var cases []attnCase
	for _, n := range []int{2, 4} {
		for _, s := range []int{8 * 3 * 5, 8 * 65} {
			for _, typ := range []cp.CommType{cp.P2P, cp.AllGather, cp.A2A} {
				cases = append(cases, attnCase{typ: typ, cp: n, s: s, b: 2, heads: 4, d: 8})
			}
			cases = append(cases, attnCase{typ: cp.A2AP2P, cp: n, s: s, b: 2, heads: 4, d: 8, hierarchical: []int{2, n / 2}})
		}
	}
	for _, c := range cases {
		for _, eod := range []float64{0.01, 0.1} {
			c.seg = packedSegments(uint64(c.s)+uint64(1000*eod), c.b, c.s, eod)
			t.Run(fmt.Sprintf("%v/eod%v", c, eod), func(t *testing.T) {
				qkv := randn(uint64(c.s), c.s, c.b, c.heads*3*c.d)
				dy := randn(uint64(c.s)+1, c.s, c.b, c.heads*c.d)
				wy, wdx := serial(t, qkv, dy, c.heads, c.seg)
				y, dx := parallel(t, c, qkv, dy)
				numtest.CloseNorm(t, "output", y.Data(), wy.Contiguous().Data(), 1e-6)
				numtest.CloseNorm(t, "dq, dk, dv", dx.Data(), wdx.Contiguous().Data(), 1e-6)
			})
		}
	}
}

// TestAttentionOneSegmentIsCausal: one segment per row gives the bits of
// context-parallel attention without segments (ring and all-to-all, with
// dropout): the mask writes nothing and skips no block.
func TestAttentionOneSegmentIsCausal(t *testing.T) {
	const s, b = 48, 2
	seg := make([]int32, b*s)
	for i := range seg {
		seg[i] = int32(i / s)
	}
	qkv := randn(8, s, b, 4*3*8)
	dy := randn(9, s, b, 4*8)
	for _, typ := range []cp.CommType{cp.P2P, cp.A2A} {
		c := attnCase{typ: typ, cp: 2, s: s, b: b, heads: 4, d: 8, dropout: 0.2}
		wy, wdx := parallel(t, c, qkv, dy)
		c.seg = seg
		y, dx := parallel(t, c, qkv, dy)
		numtest.SameBits(t, string(typ)+": output", y.Data(), wy.Data())
		numtest.SameBits(t, string(typ)+": dq, dk, dv", dx.Data(), wdx.Data())
	}
}

// TestAttentionSegmentsShapeError: segment ids that do not cover the whole
// sequence of every row are an error naming the counts.
func TestAttentionSegmentsShapeError(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	x := autograd.NewLeaf(randn(1, 6, 1, 3), "qkv", true)
	cp.Attention(tape, x, 1, cp.Options{Segments: make([]int32, 5)})
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "5 segment ids for 1 batch rows of 6 positions") {
		t.Errorf("err = %v", err)
	}
}
