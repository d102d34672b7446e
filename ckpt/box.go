package ckpt

import "fmt"

// Box is a rectangular block of a tensor: Offset[d] ≤ i_d < Offset[d] +
// Shape[d] in every dimension d. Its elements are stored in row-major
// order.
type Box struct {
	Offset []int `json:"offset"`
	Shape  []int `json:"shape"`
}

// Numel returns the number of elements of b.
func (b Box) Numel() int {
	n := 1
	for _, d := range b.Shape {
		n *= d
	}
	return n
}

// Intersect returns the box b and c share, and whether it is non-empty.
func (b Box) Intersect(c Box) (Box, bool) {
	if len(b.Shape) != len(c.Shape) {
		return Box{}, false
	}
	out := Box{Offset: make([]int, len(b.Shape)), Shape: make([]int, len(b.Shape))}
	for d := range b.Shape {
		lo := max(b.Offset[d], c.Offset[d])
		hi := min(b.Offset[d]+b.Shape[d], c.Offset[d]+c.Shape[d])
		if hi <= lo {
			return Box{}, false
		}
		out.Offset[d], out.Shape[d] = lo, hi-lo
	}
	return out, true
}

// String prints b as "[0:4, 8:16]".
func (b Box) String() string {
	s := "["
	for d := range b.Shape {
		if d > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d:%d", b.Offset[d], b.Offset[d]+b.Shape[d])
	}
	return s + "]"
}

// FlatBoxes splits the elements lo ≤ k < hi of a row-major tensor of
// shape into boxes, each a contiguous run of that order (a partial row, a
// block of whole rows, a partial row, recursively), in order: a flat range
// such as a distributed optimizer's shard of a parameter, as boxes.
func FlatBoxes(shape []int, lo, hi int) []Box {
	if lo >= hi {
		return nil
	}
	if len(shape) == 0 {
		return []Box{{Offset: []int{}, Shape: []int{}}}
	}
	inner := 1
	for _, d := range shape[1:] {
		inner *= d
	}
	prefix := func(row, rows int, sub Box) Box {
		return Box{Offset: append([]int{row}, sub.Offset...), Shape: append([]int{rows}, sub.Shape...)}
	}
	whole := func(row, rows int) Box {
		b := Box{Offset: []int{row}, Shape: []int{rows}}
		for _, d := range shape[1:] {
			b.Offset, b.Shape = append(b.Offset, 0), append(b.Shape, d)
		}
		return b
	}
	if inner == 0 {
		return nil
	}
	first, last := lo/inner, (hi-1)/inner
	if first == last {
		if lo%inner == 0 && hi-lo == inner {
			return []Box{whole(first, 1)}
		}
		var out []Box
		for _, sub := range FlatBoxes(shape[1:], lo-first*inner, hi-first*inner) {
			out = append(out, prefix(first, 1, sub))
		}
		return out
	}
	var out []Box
	start := first
	if lo%inner != 0 {
		for _, sub := range FlatBoxes(shape[1:], lo%inner, inner) {
			out = append(out, prefix(first, 1, sub))
		}
		start++
	}
	end := hi / inner // rows [start, end) are whole
	if end > start {
		out = append(out, whole(start, end-start))
	}
	if hi%inner != 0 {
		for _, sub := range FlatBoxes(shape[1:], 0, hi%inner) {
			out = append(out, prefix(end, 1, sub))
		}
	}
	return out
}

// Partition says how a rank's local tensor is cut from the whole tensor:
// Megatron's tensor-parallel attributes. Along dimension Dim the whole
// tensor is Size·Stride chunks of c = local/Stride elements; the rank
// holds chunks Rank, Rank+Size, … in order. Dim < 0 (or Size 1): the rank
// holds the whole tensor.
type Partition struct {
	Dim, Stride, Size, Rank int
}

// Region is a block of a rank's local tensor and where it lies in the
// whole tensor: the same elements, in the same row-major order within the
// block.
type Region struct {
	Local, Global Box
}

// Regions maps the local boxes of a rank's tensor (shape local) to the
// whole tensor, splitting each at the partition's chunk boundaries, and
// clips them to whole (the real shape: the vocabulary's padding rows are
// not part of a checkpoint). Empty regions are dropped.
func Regions(local []int, p Partition, whole []int, boxes []Box) []Region {
	var out []Region
	for _, b := range boxes {
		if p.Dim < 0 || p.Size <= 1 || p.Dim >= len(local) {
			out = appendClipped(out, Region{Local: b, Global: b}, whole)
			continue
		}
		stride := max(p.Stride, 1)
		c := local[p.Dim] / stride
		if c == 0 {
			continue
		}
		lo, hi := b.Offset[p.Dim], b.Offset[p.Dim]+b.Shape[p.Dim]
		for j := lo / c; j*c < hi; j++ {
			s, e := max(lo, j*c), min(hi, (j+1)*c)
			l := Box{Offset: append([]int(nil), b.Offset...), Shape: append([]int(nil), b.Shape...)}
			l.Offset[p.Dim], l.Shape[p.Dim] = s, e-s
			g := Box{Offset: append([]int(nil), l.Offset...), Shape: append([]int(nil), l.Shape...)}
			g.Offset[p.Dim] = (p.Rank+j*p.Size)*c + (s - j*c)
			out = appendClipped(out, Region{Local: l, Global: g}, whole)
		}
	}
	return out
}

// appendClipped appends r cut to the whole shape, if anything is left.
// Clipping only removes high indices, so the local box keeps its offset.
func appendClipped(out []Region, r Region, whole []int) []Region {
	for d := range r.Global.Shape {
		if end := r.Global.Offset[d] + r.Global.Shape[d]; end > whole[d] {
			cut := end - whole[d]
			if cut >= r.Global.Shape[d] {
				return out
			}
			r.Global.Shape = append([]int(nil), r.Global.Shape...)
			r.Local.Shape = append([]int(nil), r.Local.Shape...)
			r.Global.Shape[d] -= cut
			r.Local.Shape[d] -= cut
		}
	}
	return append(out, r)
}

// CopyBox copies the elements of box b from src, a row-major tensor of
// shape srcShape whose first element is element srcBase of that tensor
// (src holds a flat range of it), into dst in b's row-major order.
func CopyBox(dst []float32, src []float32, srcShape []int, srcBase int, b Box) {
	walkRows(srcShape, b, func(flat, k, n int) {
		copy(dst[k:k+n], src[flat-srcBase:flat-srcBase+n])
	})
}

// PasteBox is CopyBox's inverse: it writes src, box b's elements in
// row-major order, into dst (a flat range of a tensor of shape dstShape
// starting at element dstBase).
func PasteBox(dst []float32, dstShape []int, dstBase int, b Box, src []float32) {
	walkRows(dstShape, b, func(flat, k, n int) {
		copy(dst[flat-dstBase:flat-dstBase+n], src[k:k+n])
	})
}

// walkRows calls f for each contiguous run of box b within a row-major
// tensor of the given shape: flat is the run's first element in the
// tensor, k in the box, n its length.
func walkRows(shape []int, b Box, f func(flat, k, n int)) {
	nd := len(shape)
	if nd == 0 {
		f(0, 0, 1)
		return
	}
	n := b.Shape[nd-1]
	if b.Numel() == 0 {
		return
	}
	strides := make([]int, nd)
	s := 1
	for d := nd - 1; d >= 0; d-- {
		strides[d] = s
		s *= shape[d]
	}
	idx := make([]int, nd-1) // position within the box's leading dims
	for k := 0; ; k += n {
		flat := b.Offset[nd-1]
		for d := 0; d < nd-1; d++ {
			flat += (b.Offset[d] + idx[d]) * strides[d]
		}
		f(flat, k, n)
		d := nd - 2
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < b.Shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}
