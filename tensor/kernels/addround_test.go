package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
	"github.com/x448/float16"
)

// addRoundInputs returns 16-bit gradients (as float32 values to round) and float32
// contributions: a length that is not a multiple of the block size, values of mixed
// magnitudes, contributions that cancel the gradient exactly, ties and specials.
func addRoundInputs() (grad, src []float32) {
	g := rng.New(7)
	n := 3*addRoundBlock + 37
	grad, src = normal(g, n, 0, 1), normal(g, n, 0, 1e-2)
	for i := 0; i < n; i += 5 {
		src[i] *= 1e3 // contributions as large as the gradient
	}
	for i := 1; i < n; i += 11 {
		src[i] = -grad[i] // nearly cancels the rounded gradient
	}
	inf := float32(math.Inf(1))
	grad = append(grad, 0, 1, 1, -1, 65504, 3e38, inf, 1)
	src = append(src, 0, float32(math.Ldexp(1, -8)), float32(math.Ldexp(1, -9)), float32(math.Ldexp(-3, -9)), 16, 3e38, -1, inf)
	return grad, src
}

func TestAddRoundBF16(t *testing.T) {
	grad, src := addRoundInputs()
	dst := make([]uint16, len(grad))
	for i, v := range grad {
		dst[i] = refBF16(v)
	}
	for i := 1; i < len(grad)-8; i += 11 {
		src[i] = -math.Float32frombits(uint32(dst[i]) << 16)
	}
	want := make([]uint16, len(dst))
	for i, h := range dst {
		sum := math.Float32frombits(uint32(h)<<16) + src[i]
		if sum != sum {
			t.Fatalf("element %d: the inputs sum to NaN", i)
		}
		want[i] = refBF16(sum)
	}
	AddRoundBF16(dst, src)
	for i := range dst {
		if dst[i] != want[i] {
			t.Fatalf("element %d: bf16(%v + %v) = %#04x, want %#04x", i, grad[i], src[i], dst[i], want[i])
		}
	}
	for i := 1; i < len(grad)-8; i += 11 {
		if dst[i] != 0 {
			t.Fatalf("element %d: an exactly cancelling contribution left %#04x, want +0", i, dst[i])
		}
	}
	// 1 + 2^-8 is a tie between 1 and the next bfloat16 (1 + 2^-7): to even, 1.
	if k := len(grad) - 7; dst[k] != 0x3F80 {
		t.Errorf("bf16(1 + 2^-8) = %#04x, want 0x3F80", dst[k])
	}
}

func TestAddRoundF16(t *testing.T) {
	grad, src := addRoundInputs()
	dst := make([]uint16, len(grad))
	for i, v := range grad {
		dst[i] = float16.Fromfloat32(v).Bits()
	}
	want := make([]uint16, len(dst))
	for i, h := range dst {
		want[i] = float16.Fromfloat32(float16.Frombits(h).Float32() + src[i]).Bits()
	}
	AddRoundF16(dst, src)
	for i := range dst {
		if dst[i] != want[i] {
			t.Fatalf("element %d: f16(%v + %v) = %#04x, want %#04x", i, grad[i], src[i], dst[i], want[i])
		}
	}
	// 65504 + 16 = 65520 rounds past the largest float16: +Inf.
	if k := len(grad) - 4; dst[k] != 0x7C00 {
		t.Errorf("f16(65504 + 16) = %#04x, want +Inf", dst[k])
	}
}

func TestAddRoundPanicsOnLength(t *testing.T) {
	mustPanic(t, "len(src)", func() { AddRoundBF16(make([]uint16, 2), make([]float32, 3)) })
	mustPanic(t, "len(src)", func() { AddRoundF16(make([]uint16, 3), make([]float32, 2)) })
}

func TestAddRoundDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	dst, src := make([]uint16, 1000), make([]float32, 1000)
	if n := testing.AllocsPerRun(5, func() { AddRoundBF16(dst, src); AddRoundF16(dst, src) }); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}
