package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

func TestElementwiseMatchReference(t *testing.T) {
	g := rng.New(23)
	for _, n := range []int{0, 1, 3, 4, 5, 1001} {
		a, b := normal(g, n, 0, 1), normal(g, n, 0, 1)

		dst := make([]float32, n)
		Add(dst, a, b)
		want := make([]float64, n)
		for i := range want {
			want[i] = float64(a[i]) + float64(b[i])
		}
		checkClose(t, "Add", dst, want, 1e-7, 0)

		d := clone(a)
		AddInto(d, b)
		checkClose(t, "AddInto", d, to64(dst), 0, 0)
		Add(a, a, b) // dst aliasing a
		checkClose(t, "Add aliasing", a, to64(dst), 0, 0)

		x := normal(g, n, 0, 1)
		y := clone(x)
		Scale(y, -2.5)
		for i := range want {
			want[i] = -2.5 * float64(x[i])
		}
		checkClose(t, "Scale", y, want, 1e-7, 0)

		acc := normal(g, n, 0, 1)
		ax := clone(acc)
		Axpy(ax, 0.75, x)
		for i := range want {
			want[i] = float64(acc[i]) + 0.75*float64(x[i])
		}
		checkClose(t, "Axpy", ax, want, 1e-6, 1e-7)

		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		if got := SumSquares(x); math.Abs(got-ss) > 1e-12*ss {
			t.Errorf("SumSquares(n=%d) = %v, want %v", n, got, ss)
		}
	}
}

func TestSumSquaresIsFloat64Accurate(t *testing.T) {
	// 1e6 values of 1 + 1e6 values of 1e-4: a float32 running sum would lose the small ones.
	x := make([]float32, 2000000)
	for i := range x {
		if i%2 == 0 {
			x[i] = 1
		} else {
			x[i] = 1e-4
		}
	}
	want := 1e6 + 1e6*float64(float32(1e-4))*float64(float32(1e-4))
	if got := SumSquares(x); math.Abs(got-want) > 1e-9*want {
		t.Errorf("SumSquares = %v, want %v", got, want)
	}
}

func TestColumnSumInto(t *testing.T) {
	g := rng.New(24)
	for _, sh := range []struct{ rows, cols int }{{0, 3}, {1, 1}, {5, 7}, {33, 300}, {3, 513}} {
		x := normal(g, sh.rows*sh.cols, 0, 1)
		d0 := normal(g, sh.cols, 0, 1)
		dst := clone(d0)
		ColumnSumInto(dst, x, sh.rows, sh.cols)
		want := to64(d0)
		for r := 0; r < sh.rows; r++ {
			for j := 0; j < sh.cols; j++ {
				want[j] += float64(x[r*sh.cols+j])
			}
		}
		// One float32 rounding of a float64 sum.
		checkClose(t, "ColumnSumInto", dst, want, 1e-7, 1e-7)
	}
}

func TestElementwisePanics(t *testing.T) {
	mustPanic(t, "len(a)", func() { AddInto(make([]float32, 2), make([]float32, 3)) })
	mustPanic(t, "len(b)", func() { Add(make([]float32, 2), make([]float32, 2), make([]float32, 1)) })
	mustPanic(t, "len(x)", func() { Axpy(make([]float32, 2), 1, make([]float32, 1)) })
	mustPanic(t, "len(x) = 5", func() { ColumnSumInto(make([]float32, 2), make([]float32, 5), 3, 2) })
	mustPanic(t, "invalid shape", func() { ColumnSumInto(nil, nil, -1, 0) })
}
