package tensor

import (
	"fmt"

	"github.com/gotron/gotron/tensor/kernels"
)

// DType names an element type. float32 is gotron's compute type; BFloat16
// and Float16 are storage and communication types (parameters of a
// mixed-precision model, their gradients when not accumulated in float32).
//
// It is the element type of storage, so its zero value is Float32; the
// configuration's config.DType (which can be unset) and the collectives'
// comm.DType (which carries integers too) are separate types for those
// reasons, and the file formats' (safetensors.DType, indexed.DType) are
// spelled as their formats define them.
type DType uint8

const (
	Float32 DType = iota
	BFloat16
	Float16
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Float16:
		return "float16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the bytes per element.
func (d DType) Size() int {
	if d == Float32 {
		return 4
	}
	return 2
}

// IsHalf reports whether d is a 16-bit type.
func (d DType) IsHalf() bool { return d == BFloat16 || d == Float16 }

// ToHalf returns t converted to the 16-bit type d with round-to-nearest-even
// (a new contiguous tensor; t itself when it already has type d and is
// contiguous).
func ToHalf(t *Tensor, d DType) *Tensor { return ToHalfOn(1, t, d) }

// minRoundWork is the least number of elements ToHalfOn rounds per
// goroutine.
const minRoundWork = 1 << 16

// ToHalfOn is ToHalf on up to workers goroutines, each rounding its own
// range (the same bits).
func ToHalfOn(workers int, t *Tensor, d DType) *Tensor {
	if !d.IsHalf() {
		panic(fmt.Sprintf("tensor: ToHalf to %v", d))
	}
	if t.DType() == d {
		return t.Contiguous()
	}
	src := t.Float32().Contiguous().Data()
	h := EmptyOf(d, t.shape...)
	dst := h.Bits()
	kernels.ParallelFor(len(src), max(1, min(workers, len(src)/minRoundWork)), func(lo, hi int) {
		RoundInto(d, dst[lo:hi], src[lo:hi])
	})
	return h
}

// Float32 returns t as float32: t itself, or for a 16-bit tensor a new
// contiguous float32 tensor holding its values (exactly: every bfloat16
// and float16 value is a float32).
func (t *Tensor) Float32() *Tensor {
	if t.DType() == Float32 {
		return t
	}
	c := t.Contiguous()
	out := Empty(t.shape...)
	WidenInto(c.DType(), out.Data(), c.Bits())
	return out
}

// RoundInto rounds src to the 16-bit type d into dst (round to nearest
// even; len(dst) = len(src)).
func RoundInto(d DType, dst []uint16, src []float32) {
	switch d {
	case BFloat16:
		kernels.F32ToBF16(dst, src)
	case Float16:
		kernels.F32ToF16(dst, src)
	default:
		panic(fmt.Sprintf("tensor: rounding to %v", d))
	}
}

// WidenInto widens the 16-bit values src of type d into dst (exactly;
// len(dst) = len(src)).
func WidenInto(d DType, dst []float32, src []uint16) {
	switch d {
	case BFloat16:
		kernels.BF16ToF32(dst, src)
	case Float16:
		kernels.F16ToF32(dst, src)
	default:
		panic(fmt.Sprintf("tensor: widening from %v", d))
	}
}

// widenOne and roundOne convert a single element.
func widenOne(d DType, h uint16) float32 {
	var f [1]float32
	WidenInto(d, f[:], []uint16{h})
	return f[0]
}

func roundOne(d DType, v float32) uint16 {
	var h [1]uint16
	RoundInto(d, h[:], []float32{v})
	return h[0]
}
