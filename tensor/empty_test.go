package tensor

import (
	"math"
	"runtime"
	"testing"
)

func TestEmptyShapesAndWrites(t *testing.T) {
	for _, n := range []int{0, 1, 100, minEmpty/4 - 1, minEmpty / 4, 1 << 20} {
		x := Empty(n)
		if x.Len() != n || x.DType() != Float32 || !x.IsContiguous() {
			t.Fatalf("Empty(%d): len %d dtype %v", n, x.Len(), x.DType())
		}
		d := x.Data()
		for i := range d {
			d[i] = float32(i)
		}
		runtime.GC() // the storage is the GC's: it must survive a collection
		for i, v := range d {
			if v != float32(i) {
				t.Fatalf("Empty(%d)[%d] = %v after GC, want %d", n, i, v, i)
			}
		}
		for _, dt := range []DType{BFloat16, Float16} {
			h := EmptyOf(dt, 2, n)
			if h.Len() != 2*n || h.DType() != dt || len(h.Bits()) != 2*n {
				t.Fatalf("EmptyOf(%v, 2, %d): len %d dtype %v", dt, n, h.Len(), h.DType())
			}
		}
	}
}

// TestEmptyPoison checks that under the gotron_poison tag every element of
// an Empty tensor is NaN, so an element a kernel leaves unwritten shows.
func TestEmptyPoison(t *testing.T) {
	if !poisoned {
		t.Skip("needs -tags gotron_poison (make test runs it)")
	}
	for _, n := range []int{3, 1 << 16} {
		for _, v := range Empty(n).Data() {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("Empty(%d) holds %v, want NaN", n, v)
			}
		}
		for _, dt := range []DType{BFloat16, Float16} {
			for _, v := range EmptyOf(dt, n).Float32().Data() {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("EmptyOf(%v, %d) holds %v, want NaN", dt, n, v)
				}
			}
		}
	}
}

func TestEmptyOfRejectsUnknownType(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("EmptyOf(DType(99)) did not panic")
		}
	}()
	EmptyOf(DType(99), 2)
}
