package kernels

import (
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

func TestEmbeddingForwardBackward(t *testing.T) {
	g := rng.New(16)
	vocab, dim := 11, 5
	table := normal(g, vocab*dim, 0, 1)
	ids := []int32{3, 0, 10, 3, 3, 7}
	out := make([]float32, len(ids)*dim)
	EmbeddingForward(out, table, ids, dim)
	for i, id := range ids {
		for k := 0; k < dim; k++ {
			if out[i*dim+k] != table[int(id)*dim+k] {
				t.Fatalf("out[%d,%d] = %v, want table[%d,%d] = %v", i, k, out[i*dim+k], id, k, table[int(id)*dim+k])
			}
		}
	}

	// Backward: reference scatter-add in float64, accumulated onto an existing gradient.
	dout := normal(g, len(out), 0, 1)
	d0 := normal(g, vocab*dim, 0, 1)
	want := to64(d0)
	for i, id := range ids {
		for k := 0; k < dim; k++ {
			want[int(id)*dim+k] += float64(dout[i*dim+k])
		}
	}
	dtable := clone(d0)
	EmbeddingBackward(dtable, dout, ids, dim)
	checkClose(t, "dtable", dtable, want, 1e-6, 1e-6)

	// Finite differences of Σ out ⊙ dout with respect to the table (the map is linear).
	fd := centralDiff(func(tab []float64) float64 {
		var s float64
		for i, id := range ids {
			for k := 0; k < dim; k++ {
				s += tab[int(id)*dim+k] * float64(dout[i*dim+k])
			}
		}
		return s
	}, to64(table), 1e-3)
	zero := make([]float32, vocab*dim)
	EmbeddingBackward(zero, dout, ids, dim)
	checkClose(t, "dtable vs FD", zero, fd, 1e-6, 1e-6)

	// Repeated ids accumulate in index order: (((0 + a) + b) + c) in float32, every run.
	a, b, c := float32(1e8), float32(1), float32(-1e8)
	one := []float32{0}
	EmbeddingBackward(one, []float32{a, b, c}, []int32{0, 0, 0}, 1)
	if want := ((0 + a) + b) + c; one[0] != want {
		t.Errorf("accumulation order: got %v, want %v", one[0], want)
	}
}

func TestEmbeddingPanicsOnBadID(t *testing.T) {
	mustPanic(t, "ids[1] = 4", func() { EmbeddingForward(make([]float32, 4), make([]float32, 8), []int32{0, 4}, 2) })
	mustPanic(t, "ids[0] = -1", func() { EmbeddingBackward(make([]float32, 8), make([]float32, 2), []int32{-1}, 2) })
	mustPanic(t, "dim = 3", func() { EmbeddingForward(make([]float32, 3), make([]float32, 8), []int32{0}, 3) })
}
