package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBF16VectorMatchesScalar: the bfloat16 conversions of a long slice
// (vector lanes where the CPU has them) give the bits of the scalar loop
// (one element at a time) on random bit patterns — NaNs with every
// payload, infinities, subnormals and rounding ties among them — and
// widening round-trips.
func TestBF16VectorMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 1<<16+7)
	for i := range src {
		switch i % 8 {
		case 0:
			src[i] = math.Float32frombits(r.Uint32()) // any pattern, NaNs included
		case 1:
			src[i] = math.Float32frombits(r.Uint32()&0xFFFF0000 | 0x8000) // a tie
		case 2:
			src[i] = math.Float32frombits(0x7F800000 | r.Uint32()&0x807FFFFF) // NaN or Inf
		case 3:
			src[i] = math.Float32frombits(r.Uint32() & 0x807FFFFF) // subnormal
		default:
			src[i] = float32(r.NormFloat64())
		}
	}
	got := make([]uint16, len(src))
	F32ToBF16(got, src)
	one := make([]uint16, 1)
	for i, f := range src {
		F32ToBF16(one, []float32{f})
		if got[i] != one[0] {
			t.Fatalf("element %d (%#08x): vector %#04x, scalar %#04x", i, math.Float32bits(f), got[i], one[0])
		}
	}
	wide := make([]float32, len(got))
	BF16ToF32(wide, got)
	w1 := make([]float32, 1)
	for i, h := range got {
		BF16ToF32(w1, []uint16{h})
		if math.Float32bits(wide[i]) != math.Float32bits(w1[0]) || math.Float32bits(wide[i]) != uint32(h)<<16 {
			t.Fatalf("widening %#04x: vector %#08x, scalar %#08x", h, math.Float32bits(wide[i]), math.Float32bits(w1[0]))
		}
	}
}
