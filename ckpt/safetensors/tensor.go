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
	n, _, err := shapeSize(shape, 4)
	if err != nil {
		panic(fmt.Sprintf("safetensors.F32(%q): shape %v: %v", name, shape, err))
	}
	if n != int64(len(data)) {
		panic(fmt.Sprintf("safetensors.F32(%q): shape %v holds %d elements but data has %d", name, shape, n, len(data)))
	}
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, DType: DTypeF32, Shape: append([]int(nil), shape...), Data: b}
}

// NumElements returns the number of elements of t, the product of its shape (1 for a
// scalar), or 0 if the shape has a negative dimension or if the element count or its byte
// length in t's dtype overflows an int.
func (t Tensor) NumElements() int {
	n, _, _ := shapeSize(t.Shape, max(t.DType.ElemSize(), 1))
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
	n, nbytes, err := shapeSize(t.Shape, size)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: shape %v of %s is invalid: %v: fix the shape", t.Name, t.Shape, t.DType, err)
	}
	if nbytes != int64(len(t.Data)) {
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
