package tensor_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotron/gotron/tensor"
)

// seq returns a contiguous tensor whose element at flat position i is i+1,
// so every element is distinct and nonzero.
func seq(shape ...int) *tensor.Tensor {
	t := tensor.New(shape...)
	d := t.Data()
	for i := range d {
		d[i] = float32(i + 1)
	}
	return t
}

// randn returns a contiguous tensor of N(0, 1) entries from a seeded source.
func randn(seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 3))
	t := tensor.New(shape...)
	d := t.Data()
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return t
}

// forEachIndex calls fn with every multi-index of shape in row-major order.
// The slice passed to fn is reused between calls.
func forEachIndex(shape []int, fn func(idx []int)) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	idx := make([]int, len(shape))
	for k := 0; k < n; k++ {
		fn(idx)
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < shape[i] {
				break
			}
			idx[i] = 0
		}
	}
}

// elems reads t's elements in row-major order through At, so it works for
// any strided view.
func elems(t *tensor.Tensor) []float32 {
	var out []float32
	if t.Rank() == 0 {
		return []float32{t.At()}
	}
	forEachIndex(t.Shape(), func(idx []int) { out = append(out, t.At(idx...)) })
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// mustPanic fails t unless fn panics with a message containing want.
func mustPanic(t *testing.T, what, want string, fn func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s: did not panic", what)
			return
		}
		msg, _ := r.(string)
		if !strings.Contains(msg, want) {
			t.Errorf("%s: panic %q does not mention %q", what, msg, want)
		}
	}()
	fn()
}
