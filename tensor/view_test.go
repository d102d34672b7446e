package tensor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/tensor"
)

func TestFromSliceSharesAndChecks(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	x := tensor.FromSlice(data, 2, 3)
	if got := x.At(1, 2); got != 6 {
		t.Fatalf("At(1,2) = %v, want 6", got)
	}
	data[4] = 50
	if got := x.At(1, 1); got != 50 {
		t.Fatalf("FromSlice copied its data: At(1,1) = %v after writing 50", got)
	}
	if x.Len() != 6 || x.Rank() != 2 || x.Dim(-1) != 3 || x.Dim(0) != 2 {
		t.Fatalf("Len/Rank/Dim = %d/%d/%d/%d", x.Len(), x.Rank(), x.Dim(-1), x.Dim(0))
	}
	mustPanic(t, "FromSlice length", "has 6 elements, data has 5", func() { tensor.FromSlice(make([]float32, 5), 2, 3) })
	mustPanic(t, "New negative", "negative dimension", func() { tensor.New(2, -1) })
	mustPanic(t, "Dim out of range", "out of range", func() { x.Dim(2) })
	mustPanic(t, "At out of range", "out of range", func() { x.At(2, 0) })
	mustPanic(t, "At wrong rank", "index", func() { x.At(1) })

	s := tensor.Scalar(2.5)
	if s.Rank() != 0 || s.Len() != 1 || s.At() != 2.5 {
		t.Fatalf("Scalar: rank %d len %d value %v", s.Rank(), s.Len(), s.At())
	}
	if str := tensor.FromSlice([]float32{1, 2}, 2).String(); !strings.Contains(str, "[2]") || !strings.Contains(str, "1 2") {
		t.Fatalf("String() = %q", str)
	}
}

func TestViewSharesStorageAndInfers(t *testing.T) {
	x := seq(2, 3, 4)
	v := x.View(4, -1)
	if !equalInts(v.Shape(), []int{4, 6}) {
		t.Fatalf("View(4, -1) shape %v, want [4 6]", v.Shape())
	}
	if !equalFloats(elems(v), elems(x)) {
		t.Fatal("View changed the row-major order of the elements")
	}
	v.Set(-7, 1, 2) // flat 8 = x[0, 2, 0]
	if x.At(0, 2, 0) != -7 {
		t.Fatal("View does not share storage with its source")
	}
	if s := x.View(-1); !equalInts(s.Shape(), []int{24}) {
		t.Fatalf("View(-1) shape %v", s.Shape())
	}
	// A view of a narrowed (but contiguous) slab keeps its offset.
	slab := x.Narrow(0, 1, 1) // x[1], contiguous
	w := slab.View(3, 4)
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			if w.At(i, j) != x.At(1, i, j) {
				t.Fatalf("View of a Narrow lost the offset at (%d,%d)", i, j)
			}
		}
	}
	mustPanic(t, "View non-contiguous", "non-contiguous", func() { x.Transpose(0, 2).View(24) })
	mustPanic(t, "View two -1", "more than one -1", func() { x.View(-1, -1) })
	mustPanic(t, "View wrong count", "cannot view", func() { x.View(5, 5) })
	mustPanic(t, "View -1 not dividing", "cannot view", func() { x.View(5, -1) })
	mustPanic(t, "View -1 with zero", "cannot view", func() { x.View(0, -1) })
}

func TestReshapeViewsOrCopies(t *testing.T) {
	x := seq(3, 4)
	r := x.Reshape(2, 6)
	r.Set(100, 0, 0)
	if x.At(0, 0) != 100 {
		t.Fatal("Reshape of a contiguous tensor is not a view")
	}
	xt := x.Transpose(0, 1) // [4, 3], non-contiguous
	want := elems(xt)
	rt := xt.Reshape(-1)
	if !rt.IsContiguous() || !equalFloats(rt.Data(), want) {
		t.Fatalf("Reshape of a transpose: %v, want %v", rt.Data(), want)
	}
	rt.Data()[0] = -1
	if x.At(0, 0) == -1 {
		t.Fatal("Reshape of a non-contiguous tensor wrote through to its source (must copy)")
	}
}

func TestTransposeAndPermute(t *testing.T) {
	x := seq(2, 3, 5)
	y := x.Transpose(0, -1) // [5, 3, 2]
	if !equalInts(y.Shape(), []int{5, 3, 2}) {
		t.Fatalf("Transpose shape %v", y.Shape())
	}
	if y.IsContiguous() {
		t.Fatal("a transpose reported contiguous")
	}
	forEachIndex(y.Shape(), func(i []int) {
		if y.At(i...) != x.At(i[2], i[1], i[0]) {
			t.Fatalf("Transpose(0,-1) at %v = %v, want x%v = %v", i, y.At(i...), []int{i[2], i[1], i[0]}, x.At(i[2], i[1], i[0]))
		}
	})
	p := x.Permute(1, 2, 0) // p[i,j,k] = x[k,i,j]
	if !equalInts(p.Shape(), []int{3, 5, 2}) {
		t.Fatalf("Permute shape %v", p.Shape())
	}
	forEachIndex(p.Shape(), func(i []int) {
		if p.At(i...) != x.At(i[2], i[0], i[1]) {
			t.Fatalf("Permute(1,2,0) at %v wrong", i)
		}
	})
	p.Set(-3, 2, 4, 1)
	if x.At(1, 2, 4) != -3 {
		t.Fatal("Permute does not share storage")
	}
	if q := x.Permute(-3, -2, -1); !q.IsContiguous() || !equalFloats(elems(q), elems(x)) {
		t.Fatal("identity Permute with negative axes is not the identity")
	}
	// Permuting back restores contiguity.
	if back := p.Permute(2, 0, 1); !back.IsContiguous() || !equalFloats(back.Data(), x.Data()) {
		t.Fatal("inverse Permute does not restore the source")
	}
	mustPanic(t, "Permute repeat", "repeats", func() { x.Permute(0, 0, 1) })
	mustPanic(t, "Permute length", "Permute", func() { x.Permute(0, 1) })
	mustPanic(t, "Transpose range", "out of range", func() { x.Transpose(0, 3) })
}

func TestNarrowIsAView(t *testing.T) {
	x := seq(4, 6)
	n := x.Narrow(1, 2, 3) // columns 2..4
	if !equalInts(n.Shape(), []int{4, 3}) || n.IsContiguous() {
		t.Fatalf("Narrow shape %v contiguous %v", n.Shape(), n.IsContiguous())
	}
	forEachIndex(n.Shape(), func(i []int) {
		if n.At(i...) != x.At(i[0], i[1]+2) {
			t.Fatalf("Narrow at %v wrong", i)
		}
	})
	n.Set(0, 3, 0)
	if x.At(3, 2) != 0 {
		t.Fatal("Narrow does not share storage")
	}
	// Rows of a contiguous tensor stay contiguous.
	if r := x.Narrow(-2, 1, 2); !r.IsContiguous() || r.Data()[0] != x.At(1, 0) {
		t.Fatal("row Narrow is not a contiguous view at the right offset")
	}
	// Narrow of a transposed view composes offsets and strides.
	xt := x.Transpose(0, 1)                 // [6, 4]
	m := xt.Narrow(0, 1, 4).Narrow(1, 1, 2) // xt[1:5, 1:3]
	forEachIndex(m.Shape(), func(i []int) {
		if m.At(i...) != x.At(i[1]+1, i[0]+1) {
			t.Fatalf("Narrow of a transpose at %v wrong", i)
		}
	})
	if e := x.Narrow(0, 4, 0); e.Len() != 0 {
		t.Fatalf("empty Narrow has %d elements", e.Len())
	}
	mustPanic(t, "Narrow past end", "Narrow", func() { x.Narrow(1, 4, 3) })
	mustPanic(t, "Narrow negative start", "Narrow", func() { x.Narrow(1, -1, 1) })
}

func TestSplitAndChunk(t *testing.T) {
	x := seq(3, 7, 2)
	parts := x.Split(1, 2, 0, 5)
	if len(parts) != 3 {
		t.Fatalf("Split returned %d parts", len(parts))
	}
	start := 0
	for k, p := range parts {
		size := []int{2, 0, 5}[k]
		if !equalInts(p.Shape(), []int{3, size, 2}) {
			t.Fatalf("part %d shape %v", k, p.Shape())
		}
		forEachIndex(p.Shape(), func(i []int) {
			if p.At(i...) != x.At(i[0], i[1]+start, i[2]) {
				t.Fatalf("part %d at %v wrong", k, i)
			}
		})
		start += size
	}
	parts[2].Set(-9, 0, 0, 0)
	if x.At(0, 2, 0) != -9 {
		t.Fatal("Split parts are not views")
	}
	ch := seq(6, 5).Chunk(0, 3)
	for k, c := range ch {
		if !equalInts(c.Shape(), []int{2, 5}) || c.At(0, 0) != float32(k*10+1) {
			t.Fatalf("chunk %d shape %v first %v", k, c.Shape(), c.At(0, 0))
		}
	}
	mustPanic(t, "Split sum", "sum to 6", func() { x.Split(1, 3, 3) })
	mustPanic(t, "Chunk divisibility", "not divisible", func() { x.Chunk(1, 2) })
	mustPanic(t, "Chunk zero", "Chunk", func() { x.Chunk(0, 0) })
}

// refCat concatenates along dim by index arithmetic.
func refCat(dim int, ts ...*tensor.Tensor) ([]int, []float32) {
	shape := append([]int(nil), ts[0].Shape()...)
	shape[dim] = 0
	for _, x := range ts {
		shape[dim] += x.Dim(dim)
	}
	var out []float32
	forEachIndex(shape, func(i []int) {
		j := append([]int(nil), i...)
		for _, x := range ts {
			if j[dim] < x.Dim(dim) {
				out = append(out, x.At(j...))
				return
			}
			j[dim] -= x.Dim(dim)
		}
	})
	return shape, out
}

func TestCat(t *testing.T) {
	a := seq(3, 2, 4)
	b := randn(1, 4, 3, 2).Permute(1, 2, 0) // [3, 2, 4], non-contiguous
	c := randn(2, 3, 5, 4).Narrow(1, 1, 2)  // [3, 2, 4], strided
	for _, dim := range []int{0, 1, 2, -1} {
		got := tensor.Cat(dim, a, b, c)
		d := dim
		if d < 0 {
			d += 3
		}
		shape, want := refCat(d, a, b, c)
		if !equalInts(got.Shape(), shape) || !got.IsContiguous() || !equalFloats(got.Data(), want) {
			t.Fatalf("Cat along %d: shape %v, want %v; values differ: %v", dim, got.Shape(), shape, !equalFloats(got.Data(), want))
		}
	}
	one := tensor.Cat(0, a)
	one.Data()[0] = -1
	if a.At(0, 0, 0) == -1 {
		t.Fatal("Cat of one tensor aliases its input")
	}
	// Unequal sizes along dim, including an empty piece.
	e := tensor.New(0, 2, 4)
	got := tensor.Cat(0, e, seq(1, 2, 4), a)
	_, want := refCat(0, e, seq(1, 2, 4), a)
	if !equalFloats(got.Data(), want) {
		t.Fatal("Cat with an empty piece differs from the reference")
	}
	mustPanic(t, "Cat nothing", "Cat of nothing", func() { tensor.Cat(0) })
	mustPanic(t, "Cat mismatch", "Cat along", func() { tensor.Cat(0, a, seq(3, 3, 4)) })
	mustPanic(t, "Cat rank", "Cat of shapes", func() { tensor.Cat(0, a, seq(3, 8)) })
}

func TestContiguousCloneCopyFrom(t *testing.T) {
	x := seq(3, 4)
	if x.Contiguous() != x {
		t.Fatal("Contiguous of a contiguous tensor is not the tensor itself")
	}
	xt := x.Transpose(0, 1)
	ct := xt.Contiguous()
	if ct == xt || !ct.IsContiguous() || !equalFloats(ct.Data(), elems(xt)) {
		t.Fatal("Contiguous of a transpose is not a dense copy in row-major order")
	}
	cl := x.Clone()
	cl.Data()[0] = -5
	if x.At(0, 0) == -5 {
		t.Fatal("Clone shares storage")
	}
	// A size-1 dimension's stride does not matter for contiguity.
	col := seq(5, 1).Transpose(0, 1) // [1, 5] with strides [1, 1]
	if !col.IsContiguous() {
		t.Fatalf("[1,5] view with strides %v should be contiguous", col.Strides())
	}

	// Strided to strided: write a transposed block into a column window of
	// a bigger matrix; everything outside the window stays.
	big := seq(5, 7)
	before := elems(big)
	dst := big.Narrow(1, 2, 3).Narrow(0, 1, 4) // [4, 3] window at (1, 2)
	src := randn(3, 3, 4).Transpose(0, 1)      // [4, 3] non-contiguous
	dst.CopyFrom(src)
	forEachIndex(big.Shape(), func(i []int) {
		r, c := i[0], i[1]
		want := before[r*7+c]
		if r >= 1 && r < 5 && c >= 2 && c < 5 {
			want = src.At(r-1, c-2)
		}
		if big.At(r, c) != want {
			t.Fatalf("after CopyFrom, big[%d,%d] = %v, want %v", r, c, big.At(r, c), want)
		}
	})
	s := tensor.Scalar(1)
	s.CopyFrom(tensor.Scalar(4))
	if s.At() != 4 {
		t.Fatal("CopyFrom of 0-d tensors")
	}
	mustPanic(t, "CopyFrom shape", "CopyFrom shape", func() { x.CopyFrom(seq(4, 3)) })
	mustPanic(t, "Data non-contiguous", "call Contiguous", func() { xt.Data() })
}

func TestFillAndScaleOnViews(t *testing.T) {
	big := seq(4, 5)
	before := elems(big)
	win := big.Narrow(1, 1, 3) // columns 1..3, non-contiguous
	win.Fill(-2)
	forEachIndex(big.Shape(), func(i []int) {
		want := before[i[0]*5+i[1]]
		if i[1] >= 1 && i[1] < 4 {
			want = -2
		}
		if big.At(i...) != want {
			t.Fatalf("Fill on a view: big%v = %v, want %v", i, big.At(i...), want)
		}
	})
	big = seq(4, 5)
	big.Narrow(1, 1, 3).Scale(3)
	forEachIndex(big.Shape(), func(i []int) {
		want := before[i[0]*5+i[1]]
		if i[1] >= 1 && i[1] < 4 {
			want *= 3
		}
		if big.At(i...) != want {
			t.Fatalf("Scale on a view: big%v = %v, want %v", i, big.At(i...), want)
		}
	})
	z := seq(2, 3)
	z.Scale(0)
	for _, v := range z.Data() {
		if v != 0 {
			t.Fatal("Scale(0) left a nonzero")
		}
	}
	f := tensor.Full(1.5, 2, 2)
	if !equalFloats(f.Data(), []float32{1.5, 1.5, 1.5, 1.5}) {
		t.Fatalf("Full: %v", f.Data())
	}
}

// TestReleaseRestore: Release frees the storage for a tensor and all its
// views (a use panics), Restore gives every view a zero-filled allocation
// of the same size, and Storage keeps the identity and size throughout.
func TestReleaseRestore(t *testing.T) {
	x := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	v := x.Narrow(1, 1, 2)
	id, size := x.Storage()
	if vid, _ := v.Storage(); vid != id || size != 24 {
		t.Fatalf("storage id %v/%v, size %d", id, vid, size)
	}
	x.Release()
	if !v.Released() || !x.Released() {
		t.Fatal("a view does not see the release")
	}
	for name, use := range map[string]func(){
		"Data": func() { x.Data() }, "At": func() { v.At(0, 0) }, "Clone": func() { v.Clone() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "released") {
					t.Errorf("%s of released storage: recovered %v, want a panic naming the release", name, r)
				}
			}()
			use()
		}()
	}
	if rid, rsize := x.Storage(); rid != id || rsize != size {
		t.Fatalf("released storage reports %v, %d", rid, rsize)
	}
	v.Restore()
	if x.Released() {
		t.Fatal("Restore through a view did not restore the source")
	}
	v.Set(7, 1, 0)
	if got := x.At(1, 1); got != 7 || x.At(0, 0) != 0 {
		t.Fatalf("after Restore: x[1][1] = %v, x[0][0] = %v; want 7 and 0", got, x.At(0, 0))
	}
}

// TestRestoreWith binds released storage to given elements, seen through
// every view, and refuses storage that is not released or of another
// type or size.
func TestRestoreWith(t *testing.T) {
	x := tensor.FromSlice([]float32{1, 2, 3, 4}, 2, 2)
	v := x.Narrow(0, 1, 1)
	x.Release()
	data := []float32{5, 6, 7, 8}
	v.RestoreWith(data)
	if got := x.At(1, 0); got != 7 {
		t.Fatalf("x[1][0] = %v after RestoreWith, want 7", got)
	}
	data[3] = 9
	if got := v.At(0, 1); got != 9 {
		t.Fatalf("the view reads %v, want the bound elements' 9 (not a copy)", got)
	}
	h := tensor.FromBits(tensor.BFloat16, []uint16{1, 2}, 2)
	h.Release()
	h.RestoreWithBits([]uint16{3, 4})
	if got := h.Bits()[1]; got != 4 {
		t.Fatalf("16-bit RestoreWithBits: %v, want 4", got)
	}
	for name, bad := range map[string]func(){
		"not released": func() { x.RestoreWith(data) },
		"wrong size": func() {
			y := tensor.New(3)
			y.Release()
			y.RestoreWith(data)
		},
		"wrong type": func() {
			y := tensor.New(2)
			y.Release()
			y.RestoreWithBits([]uint16{1, 2})
		},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "restoring") {
					t.Errorf("%s: recovered %v, want a panic about restoring", name, r)
				}
			}()
			bad()
		}()
	}
}
