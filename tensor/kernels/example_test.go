package kernels_test

import (
	"fmt"

	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
)

// A LayerNorm forward and backward over rows split across two workers, each accumulating
// the parameter gradients into its own buffer, summed afterwards in worker order.
func Example() {
	const rows, cols, workers = 4, 3, 2
	x := []float32{1, 2, 3, 2, 2, 2, -1, 0, 1, 10, 20, 30}
	w := []float32{1, 1, 1}
	b := []float32{0, 0, 0}
	y := make([]float32, rows*cols)
	mean, rstd := make([]float32, rows), make([]float32, rows)
	kernels.ParallelFor(rows, workers, func(lo, hi int) {
		kernels.LayerNormForward(y[lo*cols:hi*cols], mean[lo:hi], rstd[lo:hi], x[lo*cols:hi*cols], w, b, hi-lo, cols, 1e-5)
	})
	fmt.Printf("row 0: %.4f\n", y[:cols])
	fmt.Printf("means: %v\n", mean)

	dy := []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}
	dx := make([]float32, rows*cols)
	dw, db := [workers][]float32{}, [workers][]float32{}
	kernels.ParallelForWorker(rows, workers, func(wk, lo, hi int) {
		dw[wk], db[wk] = make([]float32, cols), make([]float32, cols)
		kernels.LayerNormBackward(dx[lo*cols:hi*cols], dw[wk], db[wk], dy[lo*cols:hi*cols], x[lo*cols:hi*cols],
			mean[lo:hi], rstd[lo:hi], w, hi-lo, cols)
	})
	sumW, sumB := make([]float32, cols), make([]float32, cols)
	for wk := range workers {
		kernels.AddInto(sumW, dw[wk])
		kernels.AddInto(sumB, db[wk])
	}
	fmt.Printf("db: %v\n", sumB)
	// Output:
	// row 0: [-1.2247 0.0000 1.2247]
	// means: [2 2 0 20]
	// db: [2 2 2]
}

// Dropout with a saved generator state replays the same mask, as activation recompute needs.
func ExampleDropout() {
	g := rng.New(42)
	x := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	saved := g.State()
	y, mask := make([]float32, 8), make([]byte, 8)
	kernels.Dropout(y, mask, x, 0.5, g)

	g.SetState(saved)
	y2, mask2 := make([]float32, 8), make([]byte, 8)
	kernels.Dropout(y2, mask2, x, 0.5, g)
	fmt.Println(string(mask) == string(mask2), y[0] == 0 || y[0] == 2)
	// Output: true true
}

// Cross entropy of two tokens over a four-word vocabulary, and its gradient in place.
func ExampleCrossEntropyForward() {
	logits := []float32{2, 1, 0, -1, 0, 0, 0, 0}
	labels := []int32{0, 3}
	loss, lse := make([]float32, 2), make([]float32, 2)
	kernels.CrossEntropyForward(loss, lse, logits, labels, 2, 4)
	fmt.Printf("loss %.4f, lse %.4f\n", loss, lse)

	dloss := []float32{0.5, 0.5} // the mean over two tokens
	kernels.CrossEntropyBackward(logits, logits, lse, labels, dloss, 2, 4)
	fmt.Printf("dlogits row 1: %.3f\n", logits[4:])
	// Output:
	// loss [0.4402 1.3863], lse [2.4402 1.3863]
	// dlogits row 1: [0.125 0.125 0.125 -0.375]
}
