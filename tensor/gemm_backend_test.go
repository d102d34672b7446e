package tensor_test

import (
	"math"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/dnnl"
)

// TestGemmMatchesGonum compares tensor.Gemm, which runs on the build's BLAS
// (OpenBLAS with cgo; gonum with CGO_ENABLED=0 or -tags gotron_purego),
// against gonum's pure-Go Sgemm called directly, on the same strided
// operands. In the default build this is OpenBLAS against gonum; in the
// pure-Go build both sides are gonum and the test checks that the strided
// views reach it with the right leading dimensions. The two BLAS libraries
// may block and order the k-sums differently, so the agreement is
// max|diff| ≤ 1e-5·(1+max|c|), not bitwise.
func TestGemmMatchesGonum(t *testing.T) {
	t.Logf("BLAS in use: %s; %s", blas.Kernel(), dnnl.Version())
	// The last two are above minLargeFLOPs: oneDNN's float32 GEMM, when
	// the build has it.
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {33, 17, 65}, {64, 48, 31}, {129, 7, 200}, {300, 70, 129}, {64, 513, 96}}
	seed := uint64(500)
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				seed++
				ar, ac := m, k
				if ta {
					ar, ac = k, m
				}
				br, bc := k, n
				if tb {
					br, bc = n, k
				}
				a := randn(seed, ar, ac+1).Narrow(1, 1, ac) // row stride ac+1
				b := randn(seed+1, br, bc+2).Narrow(1, 0, bc)
				c0 := randn(seed+2, m, n+3).Narrow(1, 3, n)
				alpha, beta := float32(1.5), float32(0.5)

				got := c0.Clone()
				tensor.Gemm(ta, tb, alpha, a, b, beta, got)

				// gonum on the same storage layout: the operands as flat
				// slices starting at their first element, with their strides.
				want := make([]float32, m*(n+3))
				cw := tensor.FromSlice(want, m, n+3).Narrow(1, 3, n)
				cw.CopyFrom(c0)
				aFlat := a.Contiguous().Data() // dense copies, ld = width
				bFlat := b.Contiguous().Data()
				gonum.Implementation{}.Sgemm(trans(ta), trans(tb), m, n, k, alpha, aFlat, ac, bFlat, bc, beta, want[3:], n+3)

				g, w := got.Data(), elems(cw)
				var worst, scale float64
				for i := range g {
					worst = math.Max(worst, math.Abs(float64(g[i]-w[i])))
					scale = math.Max(scale, math.Abs(float64(w[i])))
				}
				if worst > 1e-5*(1+scale) {
					t.Errorf("%s: m%d n%d k%d ta=%v tb=%v: max |diff| %.3g against gonum (scale %.3g)",
						blas.Kernel(), m, n, k, ta, tb, worst, scale)
				}
			}
		}
	}
}

func trans(t bool) gblas.Transpose {
	if t {
		return gblas.Trans
	}
	return gblas.NoTrans
}
