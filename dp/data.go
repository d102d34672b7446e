package dp

import (
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Typed storage. A buffer's parameters and gradients are comm.Buffers of
// float32, bfloat16 or float16 elements, handed to the collectives as they
// are. Arithmetic on them is float32: a 16-bit element x is widened
// exactly, w(x), and a result v is rounded once to the buffer's type with
// round to nearest even, r(v).

// block is the number of 16-bit elements widened at a time into a stack
// scratch (16 KB of float32).
const block = 4096

// checkDType refuses a type a buffer cannot hold.
func checkDType(what string, d tensor.DType) error {
	switch d {
	case tensor.Float32, tensor.BFloat16, tensor.Float16:
		return nil
	}
	return fmt.Errorf("dp: %s %v: a buffer holds float32, bfloat16 or float16", what, d)
}

// commDType returns comm's name of the buffer type d.
func commDType(d tensor.DType) comm.DType {
	switch d {
	case tensor.BFloat16:
		return comm.BFloat16
	case tensor.Float16:
		return comm.Float16
	}
	return comm.Float32
}

// dtypeOf returns the element type of a float32, bfloat16 or float16
// buffer.
func dtypeOf(b comm.Buffer) tensor.DType {
	switch b.DType() {
	case comm.BFloat16:
		return tensor.BFloat16
	case comm.Float16:
		return tensor.Float16
	}
	return tensor.Float32
}

// newData returns n zero elements of type d.
func newData(d tensor.DType, n int) comm.Buffer { return comm.NewBuffer(commDType(d), n) }

// ensureData returns buf if it holds n elements of type d, else newData.
func ensureData(buf comm.Buffer, d tensor.DType, n int) comm.Buffer {
	if buf.DType() == commDType(d) && buf.Len() == n {
		return buf
	}
	return newData(d, n)
}

// cloneData returns a copy of b.
func cloneData(b comm.Buffer) comm.Buffer {
	c := newData(dtypeOf(b), b.Len())
	c.CopyFrom(b)
	return c
}

// viewOf returns elements [lo, hi) of b as a contiguous tensor of the
// given shape and b's type, sharing b's memory.
func viewOf(b comm.Buffer, lo, hi int, shape []int) *tensor.Tensor {
	s := b.Slice(lo, hi)
	if d := dtypeOf(b); d.IsHalf() {
		return tensor.FromBits(d, s.Uint16s(), shape...)
	}
	return tensor.FromSlice(s.Float32s(), shape...)
}

// widenInto sets dst = w(src) (a copy for float32; len(dst) = src.Len()).
func widenInto(dst []float32, src comm.Buffer) {
	if d := dtypeOf(src); d.IsHalf() {
		tensor.WidenInto(d, dst, src.Uint16s())
		return
	}
	copy(dst, src.Float32s())
}

// roundInto sets dst = r(src) (a copy for float32).
func roundInto(dst comm.Buffer, src []float32) {
	if d := dtypeOf(dst); d.IsHalf() {
		tensor.RoundInto(d, dst.Uint16s(), src)
		return
	}
	copy(dst.Float32s(), src)
}

// workersFor is the number of goroutines a buffer-wide loop over n
// elements uses: one per 2¹⁶ elements, at most workers.
func workersFor(n, workers int) int { return max(1, min(workers, n>>16)) }

// clearData zeroes x (+0 in every type) with up to workers goroutines.
func clearData(x comm.Buffer, workers int) {
	if dtypeOf(x).IsHalf() {
		h := x.Uint16s()
		kernels.ParallelFor(len(h), workersFor(len(h), workers), func(lo, hi int) { clear(h[lo:hi]) })
		return
	}
	f := x.Float32s()
	kernels.ParallelFor(len(f), workersFor(len(f), workers), func(lo, hi int) { clear(f[lo:hi]) })
}

// scaleData sets every element x ← x·s with up to workers goroutines: in
// float32 for a float32 buffer, else x ← r(w(x)·s), widened, multiplied in
// float32 and rounded once, block by block (as torch multiplies a bfloat16
// or float16 tensor by a scalar).
func scaleData(x comm.Buffer, s float32, workers int) {
	d := dtypeOf(x)
	if !d.IsHalf() {
		f := x.Float32s()
		kernels.ParallelFor(len(f), workersFor(len(f), workers), func(lo, hi int) { kernels.Scale(f[lo:hi], s) })
		return
	}
	h := x.Uint16s()
	kernels.ParallelFor(len(h), workersFor(len(h), workers), func(lo, hi int) {
		var scratch [block]float32
		for a := lo; a < hi; a += block {
			b := min(a+block, hi)
			w := scratch[:b-a]
			tensor.WidenInto(d, w, h[a:b])
			kernels.Scale(w, s)
			tensor.RoundInto(d, h[a:b], w)
		}
	})
}

// sumSquares returns Σ w(x)² in float64: kernels.SumSquares of a float32
// buffer, or of each block of a 16-bit one widened in turn (the blocks'
// sums added in order), without a float32 copy of the whole buffer.
func sumSquares(x comm.Buffer) float64 {
	d := dtypeOf(x)
	if !d.IsHalf() {
		return kernels.SumSquares(x.Float32s())
	}
	h := x.Uint16s()
	var scratch [block]float32
	s := 0.0
	for a := 0; a < len(h); a += block {
		b := min(a+block, len(h))
		w := scratch[:b-a]
		tensor.WidenInto(d, w, h[a:b])
		s += kernels.SumSquares(w)
	}
	return s
}

// sumChunks sets shard = r(Σ_k w(chunk k of all)), k = 0 … n−1 left to
// right in float32, rounded once (all holds n chunks of shard's length and
// type): the local half of reduce_scatter_with_fp32_accumulation.
func sumChunks(shard, all comm.Buffer, n int) {
	m := shard.Len()
	d := dtypeOf(shard)
	if !d.IsHalf() {
		s, a := shard.Float32s(), all.Float32s()
		copy(s, a[:m])
		for k := 1; k < n; k++ {
			kernels.AddInto(s, a[k*m:(k+1)*m])
		}
		return
	}
	s, a := shard.Uint16s(), all.Uint16s()
	var acc, x [block]float32
	for lo := 0; lo < m; lo += block {
		hi := min(lo+block, m)
		sum, next := acc[:hi-lo], x[:hi-lo]
		tensor.WidenInto(d, sum, a[lo:hi])
		for k := 1; k < n; k++ {
			tensor.WidenInto(d, next, a[k*m+lo:k*m+hi])
			kernels.AddInto(sum, next)
		}
		tensor.RoundInto(d, s[lo:hi], sum)
	}
}

// shardOf returns rank r's shard [r·n/k, (r+1)·n/k) of a bucket's data
// split k ways (the reference's shard_buffer), sharing its memory.
func shardOf(data comm.Buffer, k, r int) comm.Buffer {
	m := data.Len() / k
	return data.Slice(r*m, (r+1)*m)
}
