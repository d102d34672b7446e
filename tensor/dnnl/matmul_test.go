package dnnl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gotron/gotron/tensor/kernels"
)

// gemmCase is one GemmBF16 call, or GemmF32 call if f32: the shape, the
// layout, alpha, beta and the threads.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
	alpha, beta    float32
	f32            bool
	threads        int
	path           *Path // run GemmBF16's checks and this path, not Plan's
}

func (tc gemmCase) String() string {
	return fmt.Sprintf("m=%d,n=%d,k=%d,tA=%v,tB=%v,ld=%d/%d/%d,alpha=%g,beta=%g,f32=%v,threads=%d",
		tc.m, tc.n, tc.k, tc.transA, tc.transB, tc.lda, tc.ldb, tc.ldc, tc.alpha, tc.beta, tc.f32, tc.threads)
}

// dims returns the stored rows and columns of A and B.
func (tc gemmCase) dims() (ar, ac, br, bc int) {
	ar, ac, br, bc = tc.m, tc.k, tc.k, tc.n
	if tc.transA {
		ar, ac = ac, ar
	}
	if tc.transB {
		br, bc = bc, br
	}
	return
}

// operands fills A and B with normal values (rounded to bf16 unless f32)
// and C with normal values, each slice exactly (rows−1)·ld + cols long;
// C's padding holds a sentinel that the GEMM must not touch.
func (tc gemmCase) operands(r *rand.Rand) (a, b, c []float32) {
	ar, ac, br, bc := tc.dims()
	fill := func(n int) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = float32(r.NormFloat64())
		}
		if !tc.f32 {
			h := make([]uint16, n)
			kernels.F32ToBF16(h, f)
			kernels.BF16ToF32(f, h)
		}
		return f
	}
	a, b = fill((ar-1)*tc.lda+ac), fill((br-1)*tc.ldb+bc)
	c = make([]float32, (tc.m-1)*tc.ldc+tc.n)
	for i := range c {
		c[i] = padSentinel
		if i%tc.ldc < tc.n {
			c[i] = float32(r.NormFloat64())
		}
	}
	return a, b, c
}

const padSentinel = 12345.5

// reference computes alpha·op(A)·op(B) + beta·C in float64, and for each
// element the bound 1e-5·√k·(|alpha|·Σ|a||b| + |beta·c|): float32
// accumulation over k products typically errs by about √k·2⁻²⁴ of Σ|a||b|,
// and the bound allows a hundredfold margin.
func (tc gemmCase) reference(wa, wb, c []float32) (want, tol []float64) {
	want, tol = make([]float64, len(c)), make([]float64, len(c))
	for i := range tc.m {
		for j := range tc.n {
			var s, abs float64
			for p := range tc.k {
				ai, bi := i*tc.lda+p, p*tc.ldb+j
				if tc.transA {
					ai = p*tc.lda + i
				}
				if tc.transB {
					bi = j*tc.ldb + p
				}
				av, bv := wa[ai], wb[bi]
				s += float64(av) * float64(bv)
				abs += math.Abs(float64(av) * float64(bv))
			}
			cv := float64(tc.beta) * float64(c[i*tc.ldc+j])
			want[i*tc.ldc+j] = float64(tc.alpha)*s + cv
			tol[i*tc.ldc+j] = 1e-5 * math.Sqrt(float64(tc.k)) * (math.Abs(float64(tc.alpha))*abs + math.Abs(cv))
		}
	}
	return want, tol
}

// run calls GemmBF16 (or GemmF32) on fresh operands and compares C with the
// reference, and C's padding with the sentinel.
func (tc gemmCase) run(r *rand.Rand) error {
	a, b, c := tc.operands(r)
	want, tol := tc.reference(a, b, c)
	if err := tc.call(a, b, c); err != nil {
		return err
	}
	for i, got := range c {
		if i%tc.ldc >= tc.n {
			if got != padSentinel {
				return fmt.Errorf("C padding [%d] = %v, was %v", i, got, float32(padSentinel))
			}
			continue
		}
		if d := math.Abs(float64(got) - want[i]); !(d <= tol[i]+1e-30) {
			return fmt.Errorf("C[%d,%d] = %v, want %v (|diff| %.3g > tol %.3g)", i/tc.ldc, i%tc.ldc, got, want[i], d, tol[i])
		}
	}
	return nil
}

// call runs the case's GEMM on a, b (bf16-representable unless f32) and c.
func (tc gemmCase) call(a, b, c []float32) error {
	if tc.f32 {
		return GemmF32(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, tc.lda, b, tc.ldb, tc.beta, c, tc.ldc, tc.threads)
	}
	ha, hb := make([]uint16, len(a)), make([]uint16, len(b))
	kernels.F32ToBF16(ha, a)
	kernels.F32ToBF16(hb, b)
	if tc.path != nil {
		return GemmBF16On(*tc.path, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, ha, tc.lda, hb, tc.ldb, tc.beta, c, tc.ldc, tc.threads)
	}
	return GemmBF16(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, ha, tc.lda, hb, tc.ldb, tc.beta, c, tc.ldc, tc.threads)
}

// cases lists every shape × transpose pair × layout (dense, padded leading
// dimensions) × (alpha, beta), in bf16 or float32 as f32 says, on 1 thread.
func cases(f32 bool) []gemmCase {
	var out []gemmCase
	for _, s := range [][3]int{{1, 1, 1}, {3, 5, 7}, {64, 96, 128}, {257, 129, 65}} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, pad := range []int{0, 3} {
					for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {2, -1}} {
						tc := gemmCase{transA: ta, transB: tb, m: s[0], n: s[1], k: s[2], alpha: ab[0], beta: ab[1], f32: f32, threads: 1}
						_, ac, _, bc := tc.dims()
						tc.lda, tc.ldb, tc.ldc = ac+pad, bc+2*pad, tc.n+pad+1
						if pad == 0 {
							tc.ldc = tc.n
						}
						out = append(out, tc)
					}
				}
			}
		}
	}
	return out
}

func TestGemmMatchesReference(t *testing.T) {
	t.Logf("%s; bf16 on oneDNN: %v, float32 on oneDNN: %v", Version(), Available(), F32())
	r := rand.New(rand.NewPCG(1, 2))
	for _, f32 := range []bool{false, true} {
		for _, tc := range cases(f32) {
			if err := tc.run(r); err != nil {
				t.Errorf("%v: %v", tc, err)
			}
		}
	}
}

// TestGemmPathsMatchReference runs every bf16 case, and large ones on two
// threads, by each path a plan can choose: native (where oneDNN has
// bfloat16 kernels) and widened to float32 (oneDNN's float32 matmul from
// LargeFLOPs, OpenBLAS below).
func TestGemmPathsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, p := range []Path{Native, Widened} {
		large := []gemmCase{
			{transA: true, m: 512, n: 256, k: 1024, lda: 512, ldb: 256, ldc: 256, alpha: 1, beta: 1, threads: 2},
			{transB: true, m: 300, n: 200, k: 400, lda: 403, ldb: 400, ldc: 201, alpha: 0.5, threads: 2},
		}
		for _, tc := range append(cases(false), large...) {
			tc.path = &p
			if err := tc.run(r); err != nil {
				t.Errorf("%v path: %v: %v", p, tc, err)
			}
		}
	}
}

func TestGemmTwoThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, f32 := range []bool{false, true} {
		for _, tc := range []gemmCase{
			{m: 257, n: 129, k: 65, lda: 65, ldb: 129, ldc: 129, alpha: 1},
			{transA: true, transB: true, m: 64, n: 96, k: 128, lda: 67, ldb: 131, ldc: 99, alpha: 2, beta: -1},
			{transA: true, m: 512, n: 256, k: 1024, lda: 512, ldb: 256, ldc: 256, alpha: 1, beta: 1},
		} {
			tc.f32, tc.threads = f32, 2
			if err := tc.run(r); err != nil {
				t.Errorf("%v: %v", tc, err)
			}
		}
	}
}

// TestGemmF32ThreadsSameBits checks that two threads give one thread's bits
// on the shapes of a GPT layer, where m·n keeps both threads busy without
// splitting k.
func TestGemmF32ThreadsSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []gemmCase{
		{m: 1024, n: 768, k: 256, transB: true},
		{m: 1024, n: 256, k: 768},
		{m: 768, n: 256, k: 1024, transA: true},
		{m: 256, n: 256, k: 1024, transA: true},
	} {
		_, ac, _, bc := tc.dims()
		tc.lda, tc.ldb, tc.ldc, tc.alpha, tc.f32 = ac, bc, tc.n, 1, true
		a, b, c1 := tc.operands(r)
		c2 := slices.Clone(c1)
		tc.threads = 1
		if err := tc.call(a, b, c1); err != nil {
			t.Fatal(err)
		}
		tc.threads = 2
		if err := tc.call(a, b, c2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c1, c2) {
			t.Errorf("%v: two threads give other bits than one", tc)
		}
	}
}

func TestGemmConcurrent(t *testing.T) {
	all := append(cases(false), cases(true)...)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for rep := range 3 {
				for i := g; i < len(all); i += 2 {
					if err := all[i].run(r); err != nil {
						errs <- fmt.Errorf("goroutine %d, round %d, %v: %w", g, rep, all[i], err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestGemmBF16BetaZeroOverwritesNaN(t *testing.T) {
	one, two := uint16(0x3F80), uint16(0x4000) // bf16 1 and 2
	c := []float32{float32(math.NaN()), float32(math.NaN())}
	if err := GemmBF16(false, false, 1, 2, 1, 1, []uint16{two}, 1, []uint16{one, two}, 2, 0, c, 2, 1); err != nil {
		t.Fatal(err)
	}
	if c[0] != 2 || c[1] != 4 {
		t.Fatalf("C = %v, want [2 4]", c)
	}
	c = []float32{float32(math.NaN()), float32(math.NaN())}
	if err := GemmF32(false, false, 1, 2, 1, 1, []float32{2}, 1, []float32{1, 2}, 2, 0, c, 2, 1); err != nil {
		t.Fatal(err)
	}
	if c[0] != 2 || c[1] != 4 {
		t.Fatalf("float32: C = %v, want [2 4]", c)
	}
}

func TestGemmBF16DegenerateShapes(t *testing.T) {
	c := []float32{1, 2, 3, 4}
	// k == 0 and alpha == 0 scale C by beta without reading A or B.
	if err := GemmBF16(false, false, 2, 2, 0, 1, nil, 0, nil, 2, 0.5, c, 2, 1); err != nil {
		t.Fatal(err)
	}
	if err := GemmBF16(true, true, 2, 2, 3, 0, nil, 0, nil, 0, 2, c, 2, 1); err != nil {
		t.Fatal(err)
	}
	if err := GemmF32(false, false, 2, 2, 0, 1, nil, 0, nil, 2, 3, c, 2, 2); err != nil {
		t.Fatal(err)
	}
	if c[0] != 3 || c[3] != 12 {
		t.Fatalf("C = %v, want [3 6 9 12]", c)
	}
	if err := GemmBF16(false, false, 0, 5, 5, 1, nil, 0, nil, 0, 0, nil, 0, 1); err != nil {
		t.Fatalf("m == 0: %v", err)
	}
	if err := GemmF32(false, false, 5, 0, 5, 1, nil, 0, nil, 0, 0, nil, 0, 1); err != nil {
		t.Fatalf("float32, n == 0: %v", err)
	}
}

func TestGemmBF16ReportsBadArguments(t *testing.T) {
	a, b, c := make([]uint16, 6), make([]uint16, 12), make([]float32, 8)
	for _, tc := range []struct {
		name, want     string
		transA, transB bool
		m, n, k        int
		a, b           []uint16
		lda, ldb       int
		c              []float32
		ldc            int
	}{
		{name: "short A", want: "A is 2×3", m: 2, n: 4, k: 3, a: a[:5], lda: 3, b: b, ldb: 4, c: c, ldc: 4},
		{name: "short A transposed", want: "A is 3×2", transA: true, m: 2, n: 4, k: 3, a: a[:5], lda: 2, b: b, ldb: 4, c: c, ldc: 4},
		{name: "short B", want: "B is 3×4", m: 2, n: 4, k: 3, a: a, lda: 3, b: b[:11], ldb: 4, c: c, ldc: 4},
		{name: "short B transposed", want: "B is 4×3", transB: true, m: 2, n: 4, k: 3, a: a, lda: 3, b: b[:11], ldb: 3, c: c, ldc: 4},
		{name: "short C", want: "C is 2×4", m: 2, n: 4, k: 3, a: a, lda: 3, b: b, ldb: 4, c: c[:7], ldc: 4},
		{name: "nil A", want: "A is 2×3", m: 2, n: 4, k: 3, lda: 3, b: b, ldb: 4, c: c, ldc: 4},
		{name: "lda below width", want: "leading dimension 2", m: 2, n: 4, k: 3, a: a, lda: 2, b: b, ldb: 4, c: c, ldc: 4},
		{name: "ldc below width", want: "leading dimension 3", m: 2, n: 4, k: 3, a: a, lda: 3, b: b, ldb: 4, c: c, ldc: 3},
		{name: "huge ld", want: "too large", m: 2, n: 4, k: 3, a: a, lda: math.MaxInt, b: b, ldb: 4, c: c, ldc: 4},
		{name: "negative k", want: "negative size", m: 2, n: 4, k: -1, a: a, lda: 3, b: b, ldb: 4, c: c, ldc: 4},
	} {
		err := GemmBF16(tc.transA, tc.transB, tc.m, tc.n, tc.k, 1, tc.a, tc.lda, tc.b, tc.ldb, 0, tc.c, tc.ldc, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
		fa, fb := make([]float32, len(tc.a)), make([]float32, len(tc.b))
		if tc.a == nil {
			fa = nil
		}
		err = GemmF32(tc.transA, tc.transB, tc.m, tc.n, tc.k, 1, fa, tc.lda, fb, tc.ldb, 0, tc.c, tc.ldc, 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("float32, %s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
