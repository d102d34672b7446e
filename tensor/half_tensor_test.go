package tensor

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// TestHalfTensor checks 16-bit storage: views, element access, copies
// between dtypes, Cat, Release and the storage size.
func TestHalfTensor(t *testing.T) {
	x := FromSlice([]float32{1, 2.5, -3, 1 + 1.0/256, 5, 6}, 2, 3)
	h := ToHalf(x, BFloat16)
	if h.DType() != BFloat16 || h.At(1, 0) != 1 {
		t.Fatalf("dtype %v, At(1,0) = %v", h.DType(), h.At(1, 0))
	}
	if _, b := h.Storage(); b != 12 {
		t.Errorf("storage of 6 bfloat16 elements: %d bytes, want 12", b)
	}
	tr := h.Transpose(0, 1).Contiguous()
	if tr.DType() != BFloat16 || tr.At(0, 1) != 1 || tr.At(2, 0) != -3 {
		t.Errorf("transposed copy: %v", tr.Float32())
	}
	h.Set(7.01, 0, 0) // rounds to 7 (bfloat16 spacing at 7 is 2^-5)
	if h.At(0, 0) != 7 {
		t.Errorf("Set 7.01 then At: %v, want 7", h.At(0, 0))
	}
	f := New(2, 3)
	f.CopyFrom(h)
	if f.At(0, 0) != 7 || f.At(0, 1) != 2.5 {
		t.Errorf("CopyFrom bfloat16 into float32: %v", f.Data())
	}
	c := Cat(0, h, h)
	if c.DType() != BFloat16 || c.Dim(0) != 4 || c.At(3, 2) != 6 {
		t.Errorf("Cat of bfloat16: %v %v", c.DType(), c.Float32())
	}
	h.Release()
	if !h.Released() {
		t.Fatal("released bfloat16 tensor not reported released")
	}
	h.Restore()
	if h.At(1, 2) != 0 {
		t.Errorf("restored storage not zero")
	}
	mustPanic(t, "Data of a bfloat16 tensor", func() { _ = h.Data() })
	mustPanic(t, "Bits of a float32 tensor", func() { _ = x.Bits() })
	mustPanic(t, "GEMM of bfloat16 and float16", func() {
		Gemm(false, false, 1, ToHalf(x, BFloat16), ToHalf(x.Transpose(0, 1), Float16), 0, New(2, 2))
	})
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// TestGemmHalf checks a GEMM with a 16-bit operand against float64 sums of
// the explicitly rounded operands, for every transpose, both 16-bit types,
// a 16-bit a, b or both, and a split over workers.
func TestGemmHalf(t *testing.T) {
	r := rng.New(3)
	m, n, k := 37, 29, 70
	for _, d := range []DType{BFloat16, Float16} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				as, bs := []int{m, k}, []int{k, n}
				if ta {
					as = []int{k, m}
				}
				if tb {
					bs = []int{n, k}
				}
				a, b := New(as...), New(bs...)
				r.FillNormal(a.Data(), 0, 1)
				r.FillNormal(b.Data(), 0, 1)
				ra, rb := ToHalf(a, d).Float32(), ToHalf(b, d).Float32()
				c0 := New(m, n)
				r.FillNormal(c0.Data(), 0, 1)
				want := refGemm(ta, tb, 0.5, ra, rb, 2, c0)
				for _, op := range []struct {
					name string
					a, b *Tensor
				}{{"half a", ToHalf(a, d), b}, {"half b", a, ToHalf(b, d)}, {"both", ToHalf(a, d), ToHalf(b, d)}} {
					for _, workers := range []int{1, 3} {
						c := c0.Clone()
						GemmParallel(workers, ta, tb, 0.5, op.a, op.b, 2, c)
						for i, v := range c.Data() {
							if e := math.Abs(float64(v) - want[i]); e > 1e-5*(1+math.Abs(want[i])) {
								t.Fatalf("%v %s transA=%v transB=%v workers=%d: element %d = %v, want %v", d, op.name, ta, tb, workers, i, v, want[i])
							}
						}
					}
				}
			}
		}
	}
}

// refGemm returns alpha·op(a)·op(b) + beta·c in float64.
func refGemm(ta, tb bool, alpha float64, a, b *Tensor, beta float64, c *Tensor) []float64 {
	m, n := c.Dim(0), c.Dim(1)
	k := a.Dim(1)
	if ta {
		k = a.Dim(0)
	}
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if ta {
					av = a.At(p, i)
				} else {
					av = a.At(i, p)
				}
				if tb {
					bv = b.At(j, p)
				} else {
					bv = b.At(p, j)
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = alpha*s + beta*float64(c.At(i, j))
		}
	}
	return out
}

// TestToHalfOnSameBits: rounding on several goroutines gives ToHalf's bits,
// for a tensor large enough to be split and one that is not.
func TestToHalfOnSameBits(t *testing.T) {
	for _, n := range []int{3 << 16, 100} {
		x := New(n)
		for i, d := 0, x.Data(); i < n; i++ {
			d[i] = float32(i%977)*1.000123 - 400.5
		}
		for _, d := range []DType{BFloat16, Float16} {
			want, got := ToHalf(x, d).Bits(), ToHalfOn(3, x, d).Bits()
			for i := range want {
				if want[i] != got[i] {
					t.Fatalf("%v, %d elements: element %d is %#x on 3 workers, %#x on 1", d, n, i, got[i], want[i])
				}
			}
		}
	}
}
