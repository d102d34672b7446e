package tensor

import (
	"fmt"
	"time"

	"github.com/gotron/gotron/tensor/blas"
	"github.com/gotron/gotron/tensor/dnnl"
)

// GemmKernel is one library path a GEMM can run on. GemmParallel picks one
// per call; gotron bench --gemm measures them all side by side.
type GemmKernel int

const (
	// OpenBLASF32 is float32 on single-threaded OpenBLAS calls, one per
	// worker on its block of C.
	OpenBLASF32 GemmKernel = iota
	// OneDNNF32 is oneDNN's float32 matmul with the workers as one OpenMP
	// team.
	OneDNNF32
	// OneDNNBF16 is oneDNN's bfloat16 matmul (AVX-512 BF16 or AMX).
	OneDNNBF16
	// BF16Widened widens bfloat16 operands to float32 and runs the float32
	// GEMM (oneDNN from 2 MFLOP, OpenBLAS below).
	BF16Widened
)

func (k GemmKernel) String() string {
	switch k {
	case OpenBLASF32:
		return "OpenBLAS f32"
	case OneDNNF32:
		return "oneDNN f32"
	case OneDNNBF16:
		return "oneDNN bf16"
	case BF16Widened:
		return "bf16 widened"
	}
	return fmt.Sprintf("GemmKernel(%d)", int(k))
}

// GemmKernels returns the kernels this build and CPU can run for float32
// operands, or for bfloat16 ones.
func GemmKernels(bf16 bool) []GemmKernel {
	if bf16 {
		if dnnl.Available() {
			return []GemmKernel{OneDNNBF16, BF16Widened}
		}
		return []GemmKernel{BF16Widened}
	}
	if dnnl.F32() {
		return []GemmKernel{OpenBLASF32, OneDNNF32}
	}
	return []GemmKernel{OpenBLASF32}
}

// PickedGemmKernel returns the kernel gotron runs C[m×n] = op(A)·op(B) on,
// for float32 or bfloat16 operands: GemmParallel's choice, or with
// attention the attention core's, whose one-thread block GEMMs run on
// OpenBLAS in float32 and follow dnnl.Plan's Small path in bfloat16
// whatever their size. A bfloat16 pick follows dnnl.Plan, which it may
// measure.
func PickedGemmKernel(bf16, attention bool, m, n, k int) (GemmKernel, error) {
	flops := 2 * m * n * k
	if bf16 {
		p, err := dnnl.Plan()
		if err != nil {
			return 0, err
		}
		path := p.For(flops)
		if attention {
			path = p.Small
		}
		if path == dnnl.Native {
			return OneDNNBF16, nil
		}
		return BF16Widened, nil
	}
	if float32OnDNNL(!attention, flops) {
		return OneDNNF32, nil
	}
	return OpenBLASF32, nil
}

// MeasureGemm returns kernel's rate in GFLOP/s on C[m×n] = op(A)·op(B) on
// workers threads: the best of repeated calls for about budget, after a
// warm-up call (which creates oneDNN's primitive). Operands are filled with
// small integers, exact in bfloat16.
func MeasureGemm(kernel GemmKernel, workers int, transA, transB bool, m, n, k int, budget time.Duration) (float64, error) {
	run, _, _, _, err := gemmRunner(kernel, workers, transA, transB, m, n, k)
	if err != nil {
		return 0, err
	}
	if err := run(); err != nil {
		return 0, err
	}
	best := time.Duration(0)
	for end := time.Now().Add(budget); best == 0 || time.Now().Before(end); {
		start := time.Now()
		if err := run(); err != nil {
			return 0, err
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	return 2 * float64(m) * float64(n) * float64(k) / max(best.Seconds(), 1e-9) / 1e9, nil
}

// gemmRunner returns one call of kernel on fresh operands of the shape,
// and the product's tensor, C = op(A)·op(B).
func gemmRunner(kernel GemmKernel, workers int, transA, transB bool, m, n, k int) (run func() error, a, b, c *Tensor, err error) {
	ar, ac := blas.Stored(transA, m, k)
	br, bc := blas.Stored(transB, k, n)
	a, b, c = New(ar, ac), New(br, bc), New(m, n)
	for i, d := range [][]float32{a.Data(), b.Data()} {
		for j := range d {
			d[j] = float32((j+i)%7 - 3)
		}
	}
	w := gemmWorkers(workers, 2*m*n*k)
	switch kernel {
	case OpenBLASF32: // GemmVarying's float32 path: OpenBLAS on up to workers goroutines
		return func() error { GemmVarying(workers, transA, transB, 1, a, b, 0, c); return nil }, a, b, c, nil
	case OneDNNF32:
		ad, bd, cd := a.Data(), b.Data(), c.Data()
		return func() error { return dnnl.GemmF32(transA, transB, m, n, k, 1, ad, ac, bd, bc, 0, cd, n, w) }, a, b, c, nil
	case OneDNNBF16, BF16Widened:
		ah, bh, cd := ToHalf(a, BFloat16).Bits(), ToHalf(b, BFloat16).Bits(), c.Data()
		p := dnnl.Native
		if kernel == BF16Widened {
			p = dnnl.Widened
		}
		return func() error { return dnnl.GemmBF16On(p, transA, transB, m, n, k, 1, ah, ac, bh, bc, 0, cd, n, w) }, a, b, c, nil
	}
	return nil, nil, nil, nil, fmt.Errorf("tensor: unknown GEMM kernel %d", int(kernel))
}
