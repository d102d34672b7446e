package tensor

import (
	"testing"
	"time"
)

// TestGemmKernelsCompute runs every kernel this build has, on one and two
// workers, and compares its product with the float64 triple loop (the
// operands are small integers: every kernel is exact).
func TestGemmKernelsCompute(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		for _, kern := range GemmKernels(bf16) {
			for _, s := range []struct {
				ta, tb  bool
				m, n, k int
				workers int
			}{{false, true, 64, 96, 64, 1}, {true, false, 300, 200, 40, 2}, {false, false, 128, 256, 64, 2}} {
				run, a, b, c, err := gemmRunner(kern, s.workers, s.ta, s.tb, s.m, s.n, s.k)
				if err == nil {
					err = run()
				}
				if err != nil {
					t.Fatalf("%v: %v", kern, err)
				}
				want := refMatMul(a, b, s.ta, s.tb)
				for i, v := range c.Data() {
					if v != want[i] {
						t.Fatalf("%v %+v: C[%d] = %v, want %v", kern, s, i, v, want[i])
					}
				}
			}
			if r, err := MeasureGemm(kern, 1, false, true, 64, 64, 64, time.Millisecond); err != nil || !(r > 0) {
				t.Errorf("MeasureGemm(%v) = %v, %v", kern, r, err)
			}
		}
	}
	if k, err := PickedGemmKernel(false, false, 64, 64, 64); err != nil || k != OpenBLASF32 {
		t.Errorf("a small float32 GEMM picks %v, %v; want OpenBLAS", k, err)
	}
	if k, err := PickedGemmKernel(false, true, 64, 512, 128); err != nil || k != OpenBLASF32 {
		t.Errorf("a 8 MFLOP attention block in float32 picks %v, %v; want OpenBLAS (the attention calls it)", k, err)
	}
}

// refMatMul is op(a)·op(b) by the triple loop in float64.
func refMatMul(a, b *Tensor, ta, tb bool) []float32 {
	ad, bd := a.Data(), b.Data()
	m, k := a.Dim(0), a.Dim(1)
	if ta {
		m, k = k, m
	}
	n := b.Dim(1)
	if tb {
		n = b.Dim(0)
	}
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				ai, bi := i*a.Dim(1)+p, p*b.Dim(1)+j
				if ta {
					ai = p*a.Dim(1) + i
				}
				if tb {
					bi = j*b.Dim(1) + p
				}
				av, bv := ad[ai], bd[bi]
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float32(s)
		}
	}
	return out
}

func TestGemmWarning(t *testing.T) {
	for _, c := range []struct {
		kernel       string
		oneDNN, avx2 bool
		want         string
	}{
		{"OpenBLAS SkylakeX (chosen by gotron from the CPU's features)", true, true, ""},
		{"OpenBLAS Nehalem (chosen by gotron from the CPU's features)", true, false, "this CPU has no AVX2 and FMA: GEMMs run on SSE kernels, about a quarter of an AVX2 core's rate or less; gotron bench --gemm measures them"},
		{"gonum (pure Go)", false, true, "every GEMM runs on gonum's pure-Go BLAS, several times slower than OpenBLAS; gotron bench --gemm measures them"},
		{"gonum (pure Go, several times slower: OpenBLAS could not be loaded: libopenblas.so.0: cannot open shared object file; install Debian's libopenblas0)", true, true,
			"GEMMs below 2 MFLOP run on gonum's pure-Go BLAS, several times slower than OpenBLAS (OpenBLAS could not be loaded: libopenblas.so.0: cannot open shared object file; install Debian's libopenblas0); gotron bench --gemm measures them"},
	} {
		if got := gemmWarning(c.kernel, c.oneDNN, c.avx2); got != c.want {
			t.Errorf("gemmWarning(%q, %v, %v) =\n%q\nwant\n%q", c.kernel, c.oneDNN, c.avx2, got, c.want)
		}
	}
}
