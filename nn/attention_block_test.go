package nn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// refBlock is one attention block in float64, written per element: P over the live keys
// j ≤ i + off of each row (with segment ids, only those with qseg[i] = kseg[j]), O = P·V,
// and, for dO, the gradients of Q, K and V of L = Σ dO⊙O. A row with no live key has lse
// −Inf and zero output.
func refBlock(q, k, v, do []float64, m, n, d, off int, qseg, kseg []int32) (o, lse, dq, dk, dv []float64) {
	scale := 1 / math.Sqrt(float64(d))
	o, lse = make([]float64, m*d), make([]float64, m)
	dq, dk, dv = make([]float64, m*d), make([]float64, n*d), make([]float64, n*d)
	p := make([]float64, n)
	for i := range m {
		live := min(n, max(0, i+off+1))
		sees := func(j int) bool { return qseg == nil || qseg[i] == kseg[j] }
		seen := false
		for j := range live {
			seen = seen || sees(j)
		}
		if !seen {
			lse[i] = math.Inf(-1)
			continue
		}
		mx := math.Inf(-1)
		for j := range live {
			if !sees(j) {
				p[j] = math.Inf(-1) // exp gives weight 0
				continue
			}
			var s float64
			for c := range d {
				s += q[i*d+c] * k[j*d+c]
			}
			p[j] = s * scale
			mx = math.Max(mx, p[j])
		}
		var z float64
		for j := range live {
			p[j] = math.Exp(p[j] - mx)
			z += p[j]
		}
		lse[i] = mx + math.Log(z)
		var delta float64
		for j := range live {
			p[j] /= z
			for c := range d {
				o[i*d+c] += p[j] * v[j*d+c]
			}
		}
		for c := range d {
			delta += do[i*d+c] * o[i*d+c]
		}
		for j := range live {
			var dp float64
			for c := range d {
				dp += do[i*d+c] * v[j*d+c]
				dv[j*d+c] += p[j] * do[i*d+c]
			}
			ds := scale * p[j] * (dp - delta)
			for c := range d {
				dq[i*d+c] += ds * k[j*d+c]
				dk[j*d+c] += ds * q[i*d+c]
			}
		}
	}
	return
}

func TestAttentionBlockMatchesReference(t *testing.T) {
	const m, n = 70, 90
	for _, off := range []int{0, -10, 20, n - 1, 200, -m + 3, -m - 5} {
		t.Run(fmt.Sprint("offset", off), func(t *testing.T) { checkBlock(t, m, n, off, nil, nil) })
	}
}

// TestAttentionBlockSegments: with segment ids on the query and key rows —
// contiguous documents (the keys' from an earlier or overlapping part of
// the sequence), scattered ids, and ids that leave some rows and whole
// blocks no key — the block's output, log-sum-exp and gradients equal the
// float64 reference with the explicit mask (1e-6 and 1e-5 relative norm).
func TestAttentionBlockSegments(t *testing.T) {
	const m, n = 70, 90
	g := rng.New(9)
	runs := func(rows, from int, eod float64) []int32 { // documents over positions from, from+1, …
		seg := make([]int32, rows)
		cur := int32(from / 40)
		for i := range seg {
			seg[i] = cur
			if g.Float64() < eod {
				cur++
			}
		}
		return seg
	}
	scattered := func(rows int) []int32 {
		seg := make([]int32, rows)
		for i := range seg {
			seg[i] = int32(g.Uint64() % 3)
		}
		return seg
	}
	fill := func(rows int, v int32) []int32 {
		seg := make([]int32, rows)
		for i := range seg {
			seg[i] = v
		}
		return seg
	}
	for _, c := range []struct {
		name       string
		off        int
		qseg, kseg []int32
	}{
		{"diagonal documents", 0, runs(m, 0, 0.05), nil},
		{"earlier keys", n, runs(m, 100, 0.05), runs(n, 0, 0.02)},
		{"scattered", 20, scattered(m), scattered(n)},
		{"scattered causal", -10, scattered(m), scattered(n)},
		{"some rows see nothing", n, append(fill(30, 1), fill(m-30, 2)...), fill(n, 1)},
		{"no row sees anything", n, fill(m, 3), fill(n, 2)},
	} {
		kseg := c.kseg
		if kseg == nil {
			kseg = c.qseg[:min(m, n)]
			kseg = append(kseg, runs(n-len(kseg), 0, 0)...)
		}
		t.Run(c.name, func(t *testing.T) { checkBlock(t, m, n, c.off, c.qseg, kseg) })
	}
}

// checkBlock runs an m×n block with the given offset and segment ids on
// random Q, K, V and dO and compares it with refBlock.
func checkBlock(t *testing.T, m, n, off int, qseg, kseg []int32) {
	const d = 8
	g := rng.New(5)
	rand := func(k int) ([]float32, []float64) {
		f, w := make([]float32, k), make([]float64, k)
		for i := range f {
			f[i] = float32(g.NormFloat64())
			w[i] = float64(f[i])
		}
		return f, w
	}
	q, q64 := rand(m * d)
	k, k64 := rand(n * d)
	v, v64 := rand(n * d)
	do, do64 := rand(m * d)
	narrow := func(x []float64) []float32 {
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = float32(v)
		}
		return out
	}
	wo, wlse, wdq, wdk, wdv := refBlock(q64, k64, v64, do64, m, n, d, off, qseg, kseg)
	b := nn.AttentionBlock{M: m, N: n, D: d, Offset: off, Scale: nn.AttentionScale(d), DType: tensor.Float32, QSeg: qseg, KSeg: kseg}
	s := nn.NewBlockScratch(m, n, tensor.Float32, false)
	o, lse := make([]float32, m*d), make([]float32, m)
	b.Forward(s, q, d, k, d, v, d, o, d, lse)
	closeOrZero(t, "O", o, narrow(wo), 1e-6)
	for i := range lse {
		if math.IsInf(wlse[i], -1) != math.IsInf(float64(lse[i]), -1) || !math.IsInf(wlse[i], -1) && math.Abs(float64(lse[i])-wlse[i]) > 1e-5 {
			t.Fatalf("lse[%d] = %g, want %g", i, lse[i], wlse[i])
		}
	}
	delta := make([]float32, m)
	for i := range delta {
		var x float64
		for c := range d {
			x += float64(do[i*d+c]) * float64(o[i*d+c])
		}
		delta[i] = float32(x)
	}
	dq, dk, dv := make([]float32, m*d), make([]float32, n*d), make([]float32, n*d)
	b.Backward(s, q, d, k, d, v, d, do, d, lse, delta, dq, d, dk, d, dv, d)
	closeOrZero(t, "dQ", dq, narrow(wdq), 1e-5)
	closeOrZero(t, "dK", dk, narrow(wdk), 1e-5)
	closeOrZero(t, "dV", dv, narrow(wdv), 1e-5)
}

// closeOrZero is numtest.CloseNorm, or for an all-zero want (a block no
// row sees), exact zeros.
func closeOrZero(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for _, w := range want {
		if w != 0 {
			numtest.CloseNorm(t, what, got, want, tol)
			return
		}
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("%s[%d] = %g, want 0 (no live key)", what, i, v)
		}
	}
}
