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
// j ≤ i + off of each row, O = P·V, and, for dO, the gradients of Q, K and V of
// L = Σ dO⊙O. A row with no live key has lse −Inf and zero output.
func refBlock(q, k, v, do []float64, m, n, d, off int) (o, lse, dq, dk, dv []float64) {
	scale := 1 / math.Sqrt(float64(d))
	o, lse = make([]float64, m*d), make([]float64, m)
	dq, dk, dv = make([]float64, m*d), make([]float64, n*d), make([]float64, n*d)
	p := make([]float64, n)
	for i := range m {
		live := min(n, max(0, i+off+1))
		if live == 0 {
			lse[i] = math.Inf(-1)
			continue
		}
		mx := math.Inf(-1)
		for j := range live {
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
	const m, n, d = 70, 90, 8
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
	for _, off := range []int{0, -10, 20, n - 1, 200, -m + 3, -m - 5} {
		t.Run(fmt.Sprint("offset", off), func(t *testing.T) {
			wo, wlse, wdq, wdk, wdv := refBlock(q64, k64, v64, do64, m, n, d, off)
			b := nn.AttentionBlock{M: m, N: n, D: d, Offset: off, Scale: nn.AttentionScale(d), DType: tensor.Float32}
			s := nn.NewBlockScratch(m, n, tensor.Float32, false)
			o, lse := make([]float32, m*d), make([]float32, m)
			b.Forward(s, q, d, k, d, v, d, o, d, lse)
			numtest.CloseNorm(t, "O", o, narrow(wo), 1e-6)
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
			numtest.CloseNorm(t, "dQ", dq, narrow(wdq), 1e-5)
			numtest.CloseNorm(t, "dK", dk, narrow(wdk), 1e-5)
			numtest.CloseNorm(t, "dV", dv, narrow(wdv), 1e-5)
		})
	}
}
