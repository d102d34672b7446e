package tensor

import (
	"fmt"

	"github.com/gotron/gotron/tensor/kernels"
)

// DType names an element type. float32 is gotron's compute type; BFloat16
// and Float16 are storage and communication types.
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

// Half is a contiguous tensor stored in 16 bits per element: bfloat16 (the
// top half of a float32) or IEEE float16. Values are converted from float32
// with round-to-nearest-even and widened back exactly.
type Half struct {
	DType DType // BFloat16 or Float16
	Bits  []uint16
	shape []int
}

// ToHalf converts t to a 16-bit storage type with round-to-nearest-even.
func ToHalf(t *Tensor, d DType) *Half {
	src := t.Contiguous().Data()
	h := &Half{DType: d, Bits: make([]uint16, len(src)), shape: append([]int(nil), t.Shape()...)}
	switch d {
	case BFloat16:
		kernels.F32ToBF16(h.Bits, src)
	case Float16:
		kernels.F32ToF16(h.Bits, src)
	default:
		panic(fmt.Sprintf("tensor: ToHalf to %v", d))
	}
	return h
}

// Shape returns the tensor's shape. The caller must not modify it.
func (h *Half) Shape() []int { return h.shape }

// Float32 widens h to a new float32 tensor (exactly: every bfloat16 and
// float16 value is a float32).
func (h *Half) Float32() *Tensor {
	t := New(h.shape...)
	switch h.DType {
	case BFloat16:
		kernels.BF16ToF32(t.Data(), h.Bits)
	case Float16:
		kernels.F16ToF32(t.Data(), h.Bits)
	default:
		panic(fmt.Sprintf("tensor: Half of type %v", h.DType))
	}
	return t
}
