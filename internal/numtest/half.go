package numtest

import (
	"slices"
	"testing"

	"github.com/gotron/gotron/tensor"
)

// Rounded returns x rounded to the 16-bit type d and widened back to
// float32: the values a 16-bit tensor of x holds.
func Rounded(x *tensor.Tensor, d tensor.DType) *tensor.Tensor { return tensor.ToHalf(x, d).Float32() }

// Accumulated returns round(round(g1) + g2) in d: a 16-bit gradient after
// two passes contributing g1 and g2 (float32), starting from zero.
func Accumulated(g1, g2 *tensor.Tensor, d tensor.DType) *tensor.Tensor {
	s := Rounded(g1, d).Clone()
	sd, g2d := s.Data(), g2.Contiguous().Data()
	for i := range sd {
		sd[i] += g2d[i]
	}
	return tensor.ToHalf(s, d)
}

// SameTensor fails t unless got and want have the same dtype and shape
// and equal values bit for bit (16-bit ones through their exact widening).
func SameTensor(t testing.TB, what string, got, want *tensor.Tensor) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: got %v, want %v (one is missing)", what, got, want)
	}
	if got.DType() != want.DType() || !slices.Equal(got.Shape(), want.Shape()) {
		t.Fatalf("%s: %v %v, want %v %v", what, got.DType(), got.Shape(), want.DType(), want.Shape())
	}
	SameBits(t, what, got.Float32().Contiguous().Data(), want.Float32().Contiguous().Data())
}
