package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Tensor is one named tensor of a safetensors file.
//
// Data holds product(Shape)·DType.ElemSize() bytes, the elements in row-major order,
// little-endian. A tensor of shape [] is a scalar with one element.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// F32 returns the F32 tensor named name with the given shape whose elements are data,
// encoded little-endian into a new byte slice.
//
// F32 panics if len(data) is not the product of shape: that is a bug in the caller.
func F32(name string, shape []int, data []float32) Tensor {
	n, ok := numElements(shape)
	if !ok || n != int64(len(data)) {
		panic(fmt.Sprintf("safetensors.F32(%q): shape %v holds %d elements but data has %d", name, shape, n, len(data)))
	}
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, DType: DTypeF32, Shape: append([]int(nil), shape...), Data: b}
}

// NumElements returns the number of elements of t, the product of its shape (1 for a
// scalar).
func (t Tensor) NumElements() int {
	n, _ := numElements(t.Shape)
	return int(n)
}

// Float32 decodes the elements of t as float32: F32 exactly, BF16 and F16 widened exactly
// to float32. Other dtypes are an error, as is a Data length that does not match the shape.
func (t Tensor) Float32() ([]float32, error) {
	size := t.DType.ElemSize()
	switch t.DType {
	case DTypeF32, DTypeBF16, DTypeF16:
	default:
		return nil, fmt.Errorf("tensor %s: dtype %q cannot be decoded as float32 (only F32, BF16 and F16 can): convert the file to one of those", t.Name, t.DType)
	}
	n, ok := numElements(t.Shape)
	if !ok || n*int64(size) != int64(len(t.Data)) {
		return nil, fmt.Errorf("tensor %s: shape %v of %s needs %d·%d bytes but Data has %d", t.Name, t.Shape, t.DType, n, size, len(t.Data))
	}
	out := make([]float32, n)
	switch t.DType {
	case DTypeF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case DTypeBF16:
		// bfloat16 is the upper half of a float32.
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
		}
	case DTypeF16:
		for i := range out {
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(t.Data[2*i:])).Float32()
		}
	}
	return out, nil
}

// numElements returns the product of shape and whether it is valid: no negative dimension
// and a product of at most MaxInt64/8, so that multiplying it by an element size (at most
// 8) cannot overflow.
func numElements(shape []int) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > (math.MaxInt64/8)/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}
