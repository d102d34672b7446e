//go:build goexperiment.simd && amd64

package kernels

import (
	"fmt"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// TestSIMDSwiGLUMatchesScalar checks the vector SwiGLU rows (the CPU's
// widest path) against the scalar loops bit for bit, over the cases of
// TestSIMDGeluMatchesScalar: random values, the special values and both
// sides of the exponential's range, at every tail length.
func TestSIMDSwiGLUMatchesScalar(t *testing.T) {
	skipIfFused(t)
	if !hasAVX2() {
		t.Skip("no AVX2: no vector path")
	}
	g := rng.New(103)
	for _, scale := range []float64{1, 6} {
		for _, c := range simdCases(g, scale) {
			n := len(c.x)
			what := fmt.Sprintf("scale %v, %s", scale, c.name)
			up, dy := simdValues(g, n, 1, 0.05), simdValues(g, n, 1, 0.05)
			want, wantDg, wantDup := make([]float32, n), make([]float32, n), make([]float32, n)
			swigluForwardGo(want, c.x, up)
			swigluBackwardGo(wantDg, wantDup, dy, c.x, up)
			y, dg, dup := make([]float32, n), make([]float32, n), make([]float32, n)
			if !swigluRowSIMD(y, c.x, up) || !swigluGradRowSIMD(dg, dup, dy, c.x, up) {
				t.Fatal("the vector path declined")
			}
			sameBits(t, "swiglu, "+what, y, want)
			sameBits(t, "swiglu dgate, "+what, dg, wantDg)
			sameBits(t, "swiglu dup, "+what, dup, wantDup)
		}
	}
}
