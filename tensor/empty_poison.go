//go:build gotron_poison

package tensor

import "math"

// poisoned reports whether Empty fills its tensors with NaN (the build tag
// gotron_poison).
const poisoned = true

// poisonFloat32 sets every element of d to a quiet NaN, so that an element
// a kernel forgets to write is seen in the results.
func poisonFloat32(d []float32) []float32 {
	nan := math.Float32frombits(0x7fc00001)
	for i := range d {
		d[i] = nan
	}
	return d
}

// poisonUint16 sets every element of d to a quiet NaN of type d.
func poisonUint16(d DType, h []uint16) []uint16 {
	nan := uint16(0x7fc1) // bfloat16
	if d == Float16 {
		nan = 0x7e01
	}
	for i := range h {
		h[i] = nan
	}
	return h
}
