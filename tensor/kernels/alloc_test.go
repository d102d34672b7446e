package kernels

import (
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// The kernels promise not to allocate.
func TestKernelsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	g := rng.New(27)
	rows, cols := 8, 300
	x, w, b := normal(g, rows*cols, 0, 1), normal(g, cols, 1, 0.1), normal(g, cols, 0, 0.1)
	y, dy, dx := make([]float32, rows*cols), normal(g, rows*cols, 0, 1), make([]float32, rows*cols)
	mean, rstd, dw, db := make([]float32, rows), make([]float32, rows), make([]float32, cols), make([]float32, cols)
	labels := make([]int32, rows)
	loss, lse, dloss := make([]float32, rows), make([]float32, rows), normal(g, rows, 0, 1)
	mask := make([]byte, rows*cols)
	m, v := make([]float32, rows*cols), make([]float32, rows*cols)
	h16 := make([]uint16, rows*cols)
	for name, fn := range map[string]func(){
		"LayerNormForward":  func() { LayerNormForward(y, mean, rstd, x, w, b, rows, cols, 1e-5) },
		"LayerNormBackward": func() { LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, rows, cols) },
		"GeluForward":       func() { GeluForward(y, x) },
		"GeluBackward":      func() { GeluBackward(dx, dy, x) },
		"BiasGeluForward":   func() { BiasGeluForward(y, x, b, rows, cols) },
		"BiasGeluBackward":  func() { BiasGeluBackward(dx, db, dy, x, b, rows, cols) },
		"CrossEntropy": func() {
			CrossEntropyForward(loss, lse, x, labels, rows, cols)
			CrossEntropyBackward(dx, x, lse, labels, dloss, rows, cols)
		},
		"SoftmaxWithLSE": func() { SoftmaxWithLSE(y, x, lse, dloss, rows, cols) },
		"CausalSoftmax": func() {
			copy(y, x)
			CausalSoftmaxForward(y, cols, rows, 0.125, lse)
			CausalSoftmaxRecompute(y, cols, rows, 0.125, lse)
			SoftmaxBackwardRows(dx, y, dy, cols, rows, 0.125)
		},
		"Embedding": func() {
			EmbeddingForward(y[:4*cols], x, labels[:4], cols)
			EmbeddingBackward(dx, y[:4*cols], labels[:4], cols)
		},
		"Dropout": func() {
			Dropout(y, mask, x, 0.1, g)
			DropoutBackward(dx, dy, mask, 0.1)
		},
		"AdamStep": func() {
			AdamStep(y, dy, m, v, AdamHyper{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 3})
		},
		"Elementwise": func() {
			AddInto(y, x)
			Add(y, x, dy)
			Axpy(y, 0.5, x)
			Scale(y, 2)
			_ = SumSquares(y)
			ColumnSumInto(dw, y, rows, cols)
		},
		"Half": func() {
			F32ToBF16(h16, x)
			BF16ToF32(y, h16)
			F32ToF16(h16, x)
			F16ToF32(y, h16)
		},
	} {
		if n := testing.AllocsPerRun(5, fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
