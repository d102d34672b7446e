package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refGemm is the plain triple loop in float64.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float32 {
	out := make([]float32, len(c))
	copy(out, c)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
	return out
}

func TestSgemmMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	for _, tc := range []struct{ m, n, k int }{{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 48, 16}} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				m, n, k := tc.m, tc.n, tc.k
				lda, ldb, ldc := k+2, n+1, n+3
				if ta {
					lda = m + 2
				}
				if tb {
					ldb = k + 1
				}
				ar, br := m, k
				if ta {
					ar = k
				}
				if tb {
					br = n
				}
				a, b, c := fill(ar*lda), fill(br*ldb), fill(m*ldc)
				want := refGemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c, ldc)
				Sgemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c, ldc)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						g, w := c[i*ldc+j], want[i*ldc+j]
						if math.Abs(float64(g-w)) > 1e-4*(1+math.Abs(float64(w))) {
							t.Fatalf("%v ta=%v tb=%v: C[%d,%d] = %v, want %v", tc, ta, tb, i, j, g, w)
						}
					}
				}
			}
		}
	}
}

func TestSgemmBetaZeroOverwritesNaN(t *testing.T) {
	a := []float32{1, 2}
	b := []float32{3, 4}
	c := []float32{float32(math.NaN())}
	Sgemm(false, false, 1, 1, 2, 1, a, 2, b, 1, 0, c, 1)
	if c[0] != 11 {
		t.Fatalf("C = %v, want 11", c[0])
	}
}

func TestSgemmShortSlicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a too-short A")
		}
	}()
	Sgemm(false, false, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
}

// BenchmarkSgemm runs a 512×512×512 GEMM with the BLAS's own pool at 1 and
// at 2 threads, and reports GFLOP/s (2·n³ per call).
func BenchmarkSgemm(b *testing.B) {
	const n = 512
	defer SetThreads(Threads())
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("n=%d/threads=%d", n, th), func(b *testing.B) {
			SetThreads(th)
			x, y, z := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
			for i := range x {
				x[i], y[i] = float32(i%7), float32(i%5)
			}
			for b.Loop() {
				Sgemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
