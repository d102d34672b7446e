package kernels

import (
	"sync"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

func TestParallelForCoversEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100, 1001} {
		for _, workers := range []int{-1, 0, 1, 2, 3, 8, 2000} {
			hits := make([]int32, n)
			var mu sync.Mutex
			var chunks [][2]int
			ParallelFor(n, workers, func(lo, hi int) {
				mu.Lock()
				chunks = append(chunks, [2]int{lo, hi})
				mu.Unlock()
				for i := lo; i < hi; i++ {
					hits[i]++ // distinct indices per chunk: no race
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("n=%d workers=%d: index %d visited %d times", n, workers, i, h)
				}
			}
			want := max(1, min(workers, n))
			if n == 0 {
				want = 0
			}
			if len(chunks) != want {
				t.Errorf("n=%d workers=%d: %d chunks, want %d", n, workers, len(chunks), want)
			}
			for _, c := range chunks {
				if c[0] >= c[1] {
					t.Errorf("n=%d workers=%d: empty chunk %v", n, workers, c)
				}
			}
		}
	}
}

func TestParallelForWorkerChunksAreDeterministic(t *testing.T) {
	const n, workers = 103, 4
	got := make([][2]int, workers)
	ParallelForWorker(n, workers, func(w, lo, hi int) { got[w] = [2]int{lo, hi} })
	for w := 0; w < workers; w++ {
		lo, hi := Chunk(n, workers, w)
		if got[w] != [2]int{lo, hi} {
			t.Errorf("worker %d got %v, want %v", w, got[w], [2]int{lo, hi})
		}
	}
	if got[0][0] != 0 || got[workers-1][1] != n {
		t.Errorf("chunks %v do not span [0, %d)", got, n)
	}
}

func TestParallelForRepanics(t *testing.T) {
	done := make([]bool, 4)
	mustPanic(t, "boom", func() {
		ParallelForWorker(4, 4, func(w, lo, hi int) {
			done[w] = true
			if w == 2 {
				panic("boom")
			}
		})
	})
	for w, d := range done {
		if !d {
			t.Errorf("worker %d did not run before the panic was re-raised", w)
		}
	}
}

// Splitting LayerNorm's rows across workers with per-worker dw, db and summing them in
// worker order gives the serial dx exactly, and dw, db to rounding.
func TestLayerNormBackwardSplitAcrossWorkers(t *testing.T) {
	g := rng.New(25)
	rows, cols, workers := 64, 48, 3
	x, w, b := normal(g, rows*cols, 0, 1), normal(g, cols, 1, 0.2), normal(g, cols, 0, 0.2)
	dy := normal(g, rows*cols, 0, 1)
	y, mean, rstd := make([]float32, rows*cols), make([]float32, rows), make([]float32, rows)
	LayerNormForward(y, mean, rstd, x, w, b, rows, cols, 1e-5)
	dx, dw, db := make([]float32, rows*cols), make([]float32, cols), make([]float32, cols)
	LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, rows, cols)

	pdx := make([]float32, rows*cols)
	pdw, pdb := make([][]float32, workers), make([][]float32, workers)
	ParallelForWorker(rows, workers, func(wk, lo, hi int) {
		pdw[wk], pdb[wk] = make([]float32, cols), make([]float32, cols)
		LayerNormBackward(pdx[lo*cols:hi*cols], pdw[wk], pdb[wk], dy[lo*cols:hi*cols], x[lo*cols:hi*cols],
			mean[lo:hi], rstd[lo:hi], w, hi-lo, cols)
	})
	sw, sb := make([]float32, cols), make([]float32, cols)
	for wk := 0; wk < workers; wk++ {
		AddInto(sw, pdw[wk])
		AddInto(sb, pdb[wk])
	}
	checkClose(t, "split dx", pdx, to64(dx), 0, 0)
	checkClose(t, "split dw", sw, to64(dw), 1e-5, 1e-6)
	checkClose(t, "split db", sb, to64(db), 1e-5, 1e-6)
}
