package ckpt

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// flatIndices lists the flat indices of box b in a tensor of shape, in
// the box's row-major order.
func flatIndices(shape []int, b Box) []int {
	var out []int
	walkRows(shape, b, func(flat, _, n int) {
		for i := 0; i < n; i++ {
			out = append(out, flat+i)
		}
	})
	return out
}

func randomShape(r *rand.Rand) []int {
	s := make([]int, 1+r.IntN(3))
	for i := range s {
		s[i] = 1 + r.IntN(5)
	}
	return s
}

// TestFlatBoxesCoverTheRangeInOrder: the boxes of [lo, hi) list exactly
// lo, lo+1, …, hi−1.
func TestFlatBoxesCoverTheRangeInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		shape := randomShape(r)
		n := Box{Shape: shape}.Numel()
		lo := r.IntN(n + 1)
		hi := lo + r.IntN(n-lo+1)
		var got []int
		for _, b := range FlatBoxes(shape, lo, hi) {
			got = append(got, flatIndices(shape, b)...)
		}
		want := make([]int, 0, hi-lo)
		for k := lo; k < hi; k++ {
			want = append(want, k)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("shape %v [%d, %d): boxes %v list %v", shape, lo, hi, FlatBoxes(shape, lo, hi), got)
		}
	}
}

// localOf cuts rank's local tensor from whole (values = flat indices) the
// way Megatron's tensor-parallel partitions do: chunks rank, rank+size, …
// of c = local/stride elements along dim.
func localOf(whole []float32, shape []int, p Partition) ([]float32, []int) {
	local := append([]int(nil), shape...)
	local[p.Dim] = shape[p.Dim] / p.Size
	c := local[p.Dim] / p.Stride
	out := make([]float32, Box{Shape: local}.Numel())
	walkRows(local, Box{Offset: make([]int, len(local)), Shape: local}, func(flat, _, n int) {
		for i := 0; i < n; i++ {
			// the local multi-index of flat+i
			idx := make([]int, len(local))
			rem := flat + i
			for d := len(local) - 1; d >= 0; d-- {
				idx[d] = rem % local[d]
				rem /= local[d]
			}
			j, w := idx[p.Dim]/c, idx[p.Dim]%c
			idx[p.Dim] = (p.Rank+j*p.Size)*c + w
			g := 0
			for d := range shape {
				g = g*shape[d] + idx[d]
			}
			out[flat+i] = whole[g]
		}
	})
	return out, local
}

// TestRegionsReassembleTheWholeTensor: every rank's local tensor, cut
// into random flat ranges (a distributed optimizer's shards), mapped by
// Regions and pasted into a whole tensor, gives back the whole tensor,
// each element once; the padding beyond a clipped shape is dropped.
func TestRegionsReassembleTheWholeTensor(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 500; trial++ {
		nd := 1 + r.IntN(3)
		size, stride := 1+r.IntN(4), 1+r.IntN(3)
		dim := r.IntN(nd)
		shape := make([]int, nd)
		for d := range shape {
			shape[d] = 1 + r.IntN(4)
		}
		shape[dim] = size * stride * (1 + r.IntN(3))
		real := append([]int(nil), shape...)
		if dim == 0 && r.IntN(2) == 0 {
			real[0] -= r.IntN(shape[0]) // padding rows, as the vocabulary's
		}
		whole := make([]float32, Box{Shape: shape}.Numel())
		for i := range whole {
			whole[i] = float32(i)
		}
		got := make([]float32, Box{Shape: real}.Numel())
		count := make([]int, len(got))
		for rank := 0; rank < size; rank++ {
			p := Partition{Dim: dim, Stride: stride, Size: size, Rank: rank}
			loc, lshape := localOf(whole, shape, p)
			for lo := 0; lo < len(loc); {
				hi := min(len(loc), lo+1+r.IntN(len(loc)))
				for _, reg := range Regions(lshape, p, real, FlatBoxes(lshape, lo, hi)) {
					buf := make([]float32, reg.Local.Numel())
					CopyBox(buf, loc[lo:hi], lshape, lo, reg.Local)
					PasteBox(got, real, 0, reg.Global, buf)
					for _, k := range flatIndices(real, reg.Global) {
						count[k]++
					}
				}
				lo = hi
			}
		}
		for k := range got {
			// the whole tensor's element at real's multi-index k
			idx := make([]int, nd)
			rem := k
			for d := nd - 1; d >= 0; d-- {
				idx[d] = rem % real[d]
				rem /= real[d]
			}
			g := 0
			for d := range shape {
				g = g*shape[d] + idx[d]
			}
			if count[k] != 1 || got[k] != whole[g] {
				t.Fatalf("shape %v real %v dim %d size %d stride %d: element %d written %d times, %g want %g", shape, real, dim, size, stride, k, count[k], got[k], whole[g])
			}
		}
	}
}

func TestBoxIntersect(t *testing.T) {
	a := Box{Offset: []int{0, 2}, Shape: []int{4, 4}}
	b := Box{Offset: []int{2, 0}, Shape: []int{4, 3}}
	got, ok := a.Intersect(b)
	if !ok || got.String() != "[2:4, 2:3]" {
		t.Fatalf("%v %v", got, ok)
	}
	if _, ok := a.Intersect(Box{Offset: []int{4, 0}, Shape: []int{1, 8}}); ok {
		t.Fatal("disjoint boxes intersect")
	}
}

// TestOverlappingAgreesWithPairs: the sweep finds an overlap exactly when
// some pair of boxes intersects.
func TestOverlappingAgreesWithPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 3000; trial++ {
		nd := 1 + r.IntN(3)
		boxes := make([]Box, 1+r.IntN(6))
		for i := range boxes {
			b := Box{Offset: make([]int, nd), Shape: make([]int, nd)}
			for d := 0; d < nd; d++ {
				b.Offset[d], b.Shape[d] = r.IntN(6), 1+r.IntN(3)
			}
			boxes[i] = b
		}
		want := false
		for i := range boxes {
			for j := range boxes[:i] {
				if _, ok := boxes[i].Intersect(boxes[j]); ok {
					want = true
				}
			}
		}
		b, c, got := overlapping(boxes)
		if got != want {
			t.Fatalf("%v: overlapping says %v, the pairs %v", boxes, got, want)
		}
		if _, ok := b.Intersect(c); got && !ok {
			t.Fatalf("%v: reported %v and %v, which do not intersect", boxes, b, c)
		}
	}
}
