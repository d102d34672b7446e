package safetensors

import (
	"fmt"
	"math"
	"math/bits"
)

// maxBytes bounds every element count and byte length: a tensor must be addressable by an
// int on the platform (math.MaxInt64 on 64-bit platforms).
const maxBytes = uint64(math.MaxInt)

// shapeSize returns the element count product(shape) of a tensor of elemSize-byte elements
// and its byte length count·elemSize, computed without overflow. It fails, with an error
// that names neither the file nor the tensor, if a dimension is negative or if the product
// of the non-zero dimensions, or that product times elemSize, exceeds math.MaxInt. The
// non-zero dimensions must fit even when another dimension is 0, so that the verdict does
// not depend on the order of the dimensions and every stride of an accepted shape fits in
// an int.
func shapeSize[D int | int64](shape []D, elemSize int) (numel, nbytes int64, err error) {
	for i, d := range shape {
		if d < 0 {
			return 0, 0, fmt.Errorf("dimension %d (index %d) is negative", d, i)
		}
	}
	prod, zero := uint64(1), false
	for i, d := range shape {
		if d == 0 {
			zero = true
			continue
		}
		hi, lo := bits.Mul64(prod, uint64(d))
		if hi != 0 || lo > maxBytes {
			return 0, 0, fmt.Errorf("the product of its non-zero dimensions up to index %d exceeds %d", i, maxBytes)
		}
		prod = lo
	}
	if hi, lo := bits.Mul64(prod, uint64(elemSize)); hi != 0 || lo > maxBytes {
		return 0, 0, fmt.Errorf("%d elements of %d bytes exceed %d bytes", prod, elemSize, maxBytes)
	}
	if zero {
		return 0, 0, nil
	}
	return int64(prod), int64(prod) * int64(elemSize), nil
}

// ShapeSize returns the element count of shape and its byte length with
// elemSize-byte elements, refusing a negative dimension and a shape whose
// non-zero dimensions, or their product times elemSize, exceed math.MaxInt
// (whatever the order of the dimensions). Readers of other formats
// holding shapes (the distributed checkpoint's manifest) use it too.
func ShapeSize(shape []int, elemSize int) (numel, nbytes int64, err error) {
	return shapeSize(shape, elemSize)
}
