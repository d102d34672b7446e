package tensor

import (
	"math/rand/v2"
	"testing"
)

// TestGemmParallelMatchesGemm runs GEMMs on several workers (oneDNN's
// threads), split by rows and by columns over goroutines (gemmSplit, the
// build without oneDNN) and through GemmVarying, with every transpose
// combination, and compares
// with one Gemm call. Each element is one dot product over the same k, but
// a kernel may order that sum differently for a block than for the whole
// matrix (OpenBLAS's Haswell kernel does, its Cooperlake one gives the same
// bits), so the bound is the reordered sum's: 2·k·ε·Σ|a·b| + ε|c|.
func TestGemmParallelMatchesGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fill := func(rows, cols int) *Tensor {
		x := New(rows, cols)
		for i := range x.Data() {
			x.Data()[i] = float32(r.NormFloat64())
		}
		return x
	}
	for _, sz := range []struct{ m, n, k int }{{300, 70, 129}, {37, 513, 200}, {257, 257, 64}} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				var a, b *Tensor
				if ta {
					a = fill(sz.k, sz.m)
				} else {
					a = fill(sz.m, sz.k)
				}
				if tb {
					b = fill(sz.n, sz.k)
				} else {
					b = fill(sz.k, sz.n)
				}
				c0 := fill(sz.m, sz.n)
				want := c0.Clone()
				Gemm(ta, tb, 0.5, a, b, 1, want)
				absProd := New(sz.m, sz.n) // Σ_k |a·b|·|alpha|
				Gemm(ta, tb, 0.5, absOf(a), absOf(b), 0, absProd)
				for _, run := range []struct {
					name string
					f    func(w int, got *Tensor)
				}{
					{"GemmParallel", func(w int, got *Tensor) { GemmParallel(w, ta, tb, 0.5, a, b, 1, got) }},
					{"gemmSplit", func(w int, got *Tensor) { gemmSplit(w, ta, tb, 0.5, a, b, 1, got) }},
					{"GemmVarying", func(w int, got *Tensor) { GemmVarying(w, ta, tb, 0.5, a, b, 1, got) }},
				} {
					for _, w := range []int{2, 3, 7} {
						got := c0.Clone()
						run.f(w, got)
						for i, v := range got.Data() {
							d := v - want.Data()[i]
							if d < 0 {
								d = -d
							}
							const eps = 0x1p-24
							if bound := 2*float64(sz.k)*eps*float64(absProd.Data()[i]) + eps*float64(abs32(want.Data()[i])); float64(d) > bound {
								t.Fatalf("%s %v ta=%v tb=%v workers=%d: element %d = %v, Gemm gives %v", run.name, sz, ta, tb, w, i, v, want.Data()[i])
							}
						}
					}
				}
			}
		}
	}
}

// absOf returns a contiguous copy of x with every element's magnitude.
func absOf(x *Tensor) *Tensor {
	y := x.Clone()
	for i, v := range y.Data() {
		y.Data()[i] = abs32(v)
	}
	return y
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
