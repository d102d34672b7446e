package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotron/gotron/tensor"
)

// refGemm returns alpha·op(a)·op(b) + beta·c in float64, reading every
// operand through At (so any strided view works).
func refGemm(transA, transB bool, alpha float64, a, b *tensor.Tensor, beta float64, c *tensor.Tensor) []float64 {
	at := func(x *tensor.Tensor, tr bool, i, j int) float64 {
		if tr {
			return float64(x.At(j, i))
		}
		return float64(x.At(i, j))
	}
	m, n := c.Dim(0), c.Dim(1)
	k := a.Dim(1)
	if transA {
		k = a.Dim(0)
	}
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				s += at(a, transA, i, l) * at(b, transB, l, j)
			}
			out[i*n+j] = alpha*s + beta*float64(c.At(i, j))
		}
	}
	return out
}

// closeTo reports the worst |got−want|/(1+max|want|).
func closeTo(got []float32, want []float64) float64 {
	var scale, worst float64
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i]))
		if math.IsNaN(float64(got[i])) {
			return math.Inf(1)
		}
	}
	return worst / (1 + scale)
}

// operand returns an r×c matrix as a column window of a wider random matrix
// (row stride c+3) when strided is set, else a contiguous one.
func operand(seed uint64, r, c int, strided bool) *tensor.Tensor {
	if !strided {
		return randn(seed, r, c)
	}
	return randn(seed, r, c+3).Narrow(1, 2, c)
}

func TestGemmOnStridedViews(t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {5, 7, 3}, {1, 9, 4}, {6, 1, 5}, {4, 3, 1}, {17, 13, 11}}
	seed := uint64(10)
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, strided := range []bool{false, true} {
					seed++
					name := fmt.Sprintf("m%d_n%d_k%d_ta%v_tb%v_strided%v", m, n, k, ta, tb, strided)
					ar, ac := m, k
					if ta {
						ar, ac = k, m
					}
					br, bc := k, n
					if tb {
						br, bc = n, k
					}
					a := operand(seed, ar, ac, strided)
					b := operand(seed+100, br, bc, strided)
					// c is a window of a bigger matrix: rows 1..m, columns 2..n+1.
					big := randn(seed+200, m+2, n+4)
					before := elems(big)
					c := big.Narrow(0, 1, m).Narrow(1, 2, n)
					alpha, beta := float32(0.75), float32(-1.25)
					want := refGemm(ta, tb, float64(alpha), a, b, float64(beta), c)
					tensor.Gemm(ta, tb, alpha, a, b, beta, c)
					if e := closeTo(elems(c), want); e > 1e-5 {
						t.Errorf("%s: relative error %.3g", name, e)
					}
					forEachIndex(big.Shape(), func(i []int) {
						inside := i[0] >= 1 && i[0] <= m && i[1] >= 2 && i[1] < n+2
						if !inside && big.At(i...) != before[i[0]*(n+4)+i[1]] {
							t.Fatalf("%s: Gemm wrote outside c at %v", name, i)
						}
					})
				}
			}
		}
	}
}

func TestGemmSingleRowViews(t *testing.T) {
	// A single row taken out of the middle of a matrix, and a single column
	// (a [k,1] view whose row stride is the source's width).
	x := randn(1, 5, 8)
	row := x.Narrow(0, 2, 1)              // [1, 8]
	col := randn(2, 8, 6).Narrow(1, 4, 1) // [8, 1], row stride 6
	c := tensor.New(1, 1)
	tensor.Gemm(false, false, 1, row, col, 0, c)
	want := refGemm(false, false, 1, row, col, 0, tensor.New(1, 1))
	if e := closeTo(c.Data(), want); e > 1e-6 {
		t.Fatalf("row·column: got %v, want %v", c.Data(), want)
	}
	// The transpose of a [k,1] column is a [1,k] row with unit strides.
	colT := col.Contiguous().Transpose(0, 1)
	out := tensor.MatMul(colT, x.Transpose(0, 1).Contiguous(), false, false) // [1,5]
	want = refGemm(false, false, 1, colT, x.Transpose(0, 1), 0, tensor.New(1, 5))
	if e := closeTo(out.Data(), want); e > 1e-6 {
		t.Fatalf("transposed column times matrix: relative error %.3g", e)
	}
}

func TestGemmBetaZeroOverwritesNaN(t *testing.T) {
	a, b := randn(3, 4, 5), randn(4, 5, 6)
	c := tensor.Full(float32(math.NaN()), 4, 6)
	tensor.Gemm(false, false, 1, a, b, 0, c)
	want := refGemm(false, false, 1, a, b, 0, tensor.New(4, 6))
	if e := closeTo(c.Data(), want); e > 1e-6 {
		t.Fatalf("beta = 0 did not overwrite NaNs in c: relative error %.3g", e)
	}
}

func TestGemmEmptyInnerDimensionScalesC(t *testing.T) {
	a, b := tensor.New(3, 0), tensor.New(0, 2)
	c := seq(3, 2)
	tensor.Gemm(false, false, 1, a, b, 0.5, c)
	for i, v := range c.Data() {
		if want := float32(i+1) * 0.5; v != want {
			t.Fatalf("k = 0: c[%d] = %v, want beta·c = %v", i, v, want)
		}
	}
	// m = 0 or n = 0 is a no-op.
	tensor.Gemm(false, false, 1, tensor.New(0, 3), tensor.New(3, 2), 0, tensor.New(0, 2))
}

func TestMatMul(t *testing.T) {
	for _, tc := range []struct{ ta, tb bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		m, n, k := 7, 5, 9
		ar, ac := m, k
		if tc.ta {
			ar, ac = k, m
		}
		br, bc := k, n
		if tc.tb {
			br, bc = n, k
		}
		a, b := randn(7, ar, ac), randn(8, br, bc)
		got := tensor.MatMul(a, b, tc.ta, tc.tb)
		if !equalInts(got.Shape(), []int{m, n}) {
			t.Fatalf("MatMul shape %v, want [%d %d]", got.Shape(), m, n)
		}
		want := refGemm(tc.ta, tc.tb, 1, a, b, 0, tensor.New(m, n))
		if e := closeTo(got.Data(), want); e > 1e-5 {
			t.Errorf("MatMul(ta=%v, tb=%v): relative error %.3g", tc.ta, tc.tb, e)
		}
	}
}

func TestGemmRejectsBadOperands(t *testing.T) {
	a, b, c := randn(1, 4, 3), randn(2, 3, 5), tensor.New(4, 5)
	mustPanic(t, "transposed view as operand", "not row-dense", func() {
		tensor.Gemm(false, false, 1, randn(3, 3, 4).Transpose(0, 1), b, 0, c)
	})
	mustPanic(t, "transposed view as output", "not row-dense", func() {
		tensor.Gemm(false, false, 1, a, b, 0, tensor.New(5, 4).Transpose(0, 1))
	})
	mustPanic(t, "3-d operand", "want 2-d", func() { tensor.Gemm(false, false, 1, randn(1, 2, 2, 3), b, 0, c) })
	mustPanic(t, "inner mismatch", "Gemm shapes", func() { tensor.Gemm(false, false, 1, a, randn(3, 4, 5), 0, c) })
	mustPanic(t, "output mismatch", "Gemm shapes", func() { tensor.Gemm(false, false, 1, a, b, 0, tensor.New(4, 4)) })
}
