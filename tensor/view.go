package tensor

import "fmt"

// Reshape returns a tensor with the same elements in a new shape. One
// dimension may be -1 and is inferred. A contiguous tensor is reshaped as a
// view; a non-contiguous one is first copied (as torch.reshape does). Use
// View to insist on a view.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	if !t.IsContiguous() {
		return t.Contiguous().View(shape...)
	}
	return t.View(shape...)
}

// View returns a view of a contiguous tensor in a new shape (one dimension
// may be -1). It panics on a non-contiguous tensor or a shape with a
// different element count: both are programmer bugs.
func (t *Tensor) View(shape ...int) *Tensor {
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: View of non-contiguous tensor %v (strides %v)", t.shape, t.strides))
	}
	sh := append([]int(nil), shape...)
	infer, known := -1, 1
	for i, d := range sh {
		if d == -1 {
			if infer >= 0 {
				panic(fmt.Sprintf("tensor: View %v has more than one -1", shape))
			}
			infer = i
			continue
		}
		known *= d
	}
	n := t.Len()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			panic(fmt.Sprintf("tensor: cannot view %v (%d elements) as %v", t.shape, n, shape))
		}
		sh[infer] = n / known
	}
	if numel(sh) != n {
		panic(fmt.Sprintf("tensor: cannot view %v (%d elements) as %v", t.shape, n, shape))
	}
	return &Tensor{buf: t.buf, offset: t.offset, shape: sh, strides: contiguousStrides(sh)}
}

// Transpose returns a view with dimensions i and j swapped.
func (t *Tensor) Transpose(i, j int) *Tensor {
	i, j = t.axis(i), t.axis(j)
	perm := make([]int, len(t.shape))
	for k := range perm {
		perm[k] = k
	}
	perm[i], perm[j] = j, i
	return t.Permute(perm...)
}

// Permute returns a view whose dimension k is the source's dimension
// dims[k].
func (t *Tensor) Permute(dims ...int) *Tensor {
	if len(dims) != len(t.shape) {
		panic(fmt.Sprintf("tensor: Permute %v of a %d-d tensor", dims, len(t.shape)))
	}
	seen := make([]bool, len(dims))
	sh, st := make([]int, len(dims)), make([]int, len(dims))
	for k, d := range dims {
		d = t.axis(d)
		if seen[d] {
			panic(fmt.Sprintf("tensor: Permute %v repeats a dimension", dims))
		}
		seen[d] = true
		sh[k], st[k] = t.shape[d], t.strides[d]
	}
	return &Tensor{buf: t.buf, offset: t.offset, shape: sh, strides: st}
}

// Narrow returns the view t[..., start:start+length, ...] along dim.
func (t *Tensor) Narrow(dim, start, length int) *Tensor {
	dim = t.axis(dim)
	if start < 0 || length < 0 || start+length > t.shape[dim] {
		panic(fmt.Sprintf("tensor: Narrow(%d, %d, %d) of shape %v", dim, start, length, t.shape))
	}
	sh := append([]int(nil), t.shape...)
	sh[dim] = length
	return &Tensor{buf: t.buf, offset: t.offset + start*t.strides[dim], shape: sh, strides: append([]int(nil), t.strides...)}
}

// Split returns views of t cut along dim into pieces of the given sizes,
// which must sum to the dimension's size.
func (t *Tensor) Split(dim int, sizes ...int) []*Tensor {
	dim = t.axis(dim)
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != t.shape[dim] {
		panic(fmt.Sprintf("tensor: Split sizes %v sum to %d, dimension %d has %d", sizes, total, dim, t.shape[dim]))
	}
	out := make([]*Tensor, len(sizes))
	start := 0
	for i, s := range sizes {
		out[i] = t.Narrow(dim, start, s)
		start += s
	}
	return out
}

// Chunk splits t along dim into n equal views; the size must divide.
func (t *Tensor) Chunk(dim, n int) []*Tensor {
	d := t.Dim(dim)
	if n <= 0 || d%n != 0 {
		panic(fmt.Sprintf("tensor: Chunk(%d, %d) of shape %v: %d is not divisible by %d", dim, n, t.shape, d, n))
	}
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = d / n
	}
	return t.Split(dim, sizes...)
}

// Cat concatenates tensors along dim into a new contiguous tensor. All other
// dimensions must agree.
func Cat(dim int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("tensor: Cat of nothing")
	}
	dim = ts[0].axis(dim)
	sh := append([]int(nil), ts[0].shape...)
	sh[dim] = 0
	for _, x := range ts {
		if len(x.shape) != len(sh) {
			panic(fmt.Sprintf("tensor: Cat of shapes %v and %v", ts[0].shape, x.shape))
		}
		for k := range sh {
			if k != dim && x.shape[k] != sh[k] {
				panic(fmt.Sprintf("tensor: Cat along %d of shapes %v and %v", dim, ts[0].shape, x.shape))
			}
		}
		sh[dim] += x.shape[dim]
	}
	out := EmptyOf(ts[0].DType(), sh...)
	start := 0
	for _, x := range ts {
		out.Narrow(dim, start, x.shape[dim]).CopyFrom(x)
		start += x.shape[dim]
	}
	return out
}

// Contiguous returns t itself when it is contiguous, else a contiguous copy.
func (t *Tensor) Contiguous() *Tensor {
	if t.IsContiguous() {
		return t
	}
	return t.Clone()
}

// Clone returns a contiguous copy of t, of t's dtype.
func (t *Tensor) Clone() *Tensor {
	out := EmptyOf(t.DType(), t.shape...)
	out.CopyFrom(t)
	return out
}

// CopyFrom copies src's elements into t (shapes must be equal; either may be
// a strided view). Between dtypes the values are converted: widened exactly
// into float32, rounded to nearest even into a 16-bit type.
func (t *Tensor) CopyFrom(src *Tensor) {
	if !SameShape(t, src) {
		panic(fmt.Sprintf("tensor: CopyFrom shape %v into %v", src.shape, t.shape))
	}
	if d := t.DType(); d != src.DType() {
		if d == Float32 {
			src = src.Float32()
		} else {
			src = ToHalf(src, d)
		}
	}
	if t.DType() != Float32 {
		if t.IsContiguous() && src.IsContiguous() {
			copy(t.Bits(), src.Bits())
			return
		}
		if len(t.shape) == 0 {
			t.halfStorage()[t.offset] = src.halfStorage()[src.offset]
			return
		}
		copyStrided(t.halfStorage(), t.offset, t.strides, src.halfStorage(), src.offset, src.strides, t.shape)
		return
	}
	if t.IsContiguous() && src.IsContiguous() {
		copy(t.Data(), src.Data())
		return
	}
	if len(t.shape) == 0 {
		t.storage()[t.offset] = src.storage()[src.offset]
		return
	}
	copyStrided(t.storage(), t.offset, t.strides, src.storage(), src.offset, src.strides, t.shape)
}

// copyStrided walks the shape, copying rows of the innermost dimension.
func copyStrided[E float32 | uint16](dst []E, do int, ds []int, src []E, so int, ss []int, shape []int) {
	if len(shape) == 1 {
		n, dstr, sstr := shape[0], ds[0], ss[0]
		if dstr == 1 && sstr == 1 {
			copy(dst[do:do+n], src[so:so+n])
			return
		}
		for i := 0; i < n; i++ {
			dst[do+i*dstr] = src[so+i*sstr]
		}
		return
	}
	for i := 0; i < shape[0]; i++ {
		copyStrided(dst, do+i*ds[0], ds[1:], src, so+i*ss[0], ss[1:], shape[1:])
	}
}

// Fill sets every element of t to v (rounded to nearest even in a 16-bit
// type).
func (t *Tensor) Fill(v float32) {
	if t.DType() != Float32 {
		t.CopyFrom(Full(v, t.shape...))
		return
	}
	if t.IsContiguous() {
		d := t.Data()
		for i := range d {
			d[i] = v
		}
		return
	}
	t.CopyFrom(Full(v, t.shape...))
}

// Full returns a contiguous tensor of the given shape filled with v.
func Full(v float32, shape ...int) *Tensor {
	t := Empty(shape...)
	t.Fill(v)
	return t
}
