package comm

import (
	"fmt"
	"math"

	"github.com/x448/float16"
)

// BF16ToF32 widens bfloat16 bits to a float32 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to bfloat16 bits, to nearest with ties to even;
// a NaN stays a (quiet) NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F16ToF32 widens IEEE binary16 bits to a float32 (exact).
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// F32ToF16 rounds a float32 to IEEE binary16 bits, to nearest with ties to
// even (overflow gives ±Inf, tiny values give subnormals or ±0).
func F32ToF16(f float32) uint16 { return uint16(float16.Fromfloat32(f)) }

// reduceBlock is the number of elements a Reduce accumulates at a time in
// its stack scratch (16 KB of float32: it stays in the L1 cache).
const reduceBlock = 4096

// Reduce is the reduction kernel every backend shares. For every element i
// it computes
//
//	v = ins[0][i] ⊕ ins[1][i] ⊕ … ⊕ ins[n-1][i]
//
// left to right (float32 accumulation for BFloat16 and Float16, one rounding
// at the end; Avg divides the sum by n once; see ReduceOp) and stores v into
// outs[j][i] for every j. An out may be the same memory as an in: each block
// of elements is read from every in before it is written. All buffers must
// have one dtype and one length, and ins must not be empty; Reduce panics
// otherwise (a programmer bug: the Group methods check their arguments
// first).
func Reduce(op ReduceOp, outs, ins []Buffer) {
	if len(ins) == 0 || !op.Valid() {
		panic(fmt.Sprintf("comm: Reduce(%v) of %d inputs", op, len(ins)))
	}
	dt, n := ins[0].dtype, ins[0].Len()
	for _, b := range ins {
		if b.dtype != dt || b.Len() != n {
			panic(fmt.Sprintf("comm: Reduce inputs %v and %v differ", ins[0], b))
		}
	}
	for _, b := range outs {
		if b.dtype != dt || b.Len() != n {
			panic(fmt.Sprintf("comm: Reduce output %v does not match input %v", b, ins[0]))
		}
	}
	switch dt {
	case Float32:
		reduceF32(op, outs, ins, n)
	case BFloat16:
		reduce16(op, outs, ins, n, BF16ToF32, F32ToBF16)
	case Float16:
		reduce16(op, outs, ins, n, F16ToF32, F32ToF16)
	case Int64:
		reduceI64(op, outs, ins, n)
	default:
		panic(fmt.Sprintf("comm: Reduce of invalid dtype %v", dt))
	}
}

// foldF32 folds x into acc by op (Avg folds as Sum).
func foldF32(op ReduceOp, acc, x []float32) {
	x = x[:len(acc)]
	switch op {
	case Sum, Avg:
		addTo(acc, acc, x)
	case Max:
		for i := range acc {
			acc[i] = max(acc[i], x[i])
		}
	case Min:
		for i := range acc {
			acc[i] = min(acc[i], x[i])
		}
	}
}

func reduceF32(op ReduceOp, outs, ins []Buffer, n int) {
	if op == Sum && len(ins) >= 2 && len(outs) >= 1 {
		sumF32(outs, ins, n)
		return
	}
	var scratch [reduceBlock]float32
	div := float32(len(ins))
	for lo := 0; lo < n; lo += reduceBlock {
		hi := min(lo+reduceBlock, n)
		acc := scratch[:hi-lo]
		copy(acc, ins[0].f32[lo:hi])
		for _, in := range ins[1:] {
			foldF32(op, acc, in.f32[lo:hi])
		}
		if op == Avg {
			for i := range acc {
				acc[i] /= div
			}
		}
		for _, o := range outs {
			copy(o.f32[lo:hi], acc)
		}
	}
}

// sumF32 is the float32 Sum of two or more inputs: the last addition writes
// straight into the outputs, so two inputs take a single pass.
func sumF32(outs, ins []Buffer, n int) {
	last := len(ins) - 1
	if last == 1 {
		sumInto(outs, 0, n, ins[0].f32[:n], ins[1].f32[:n])
		return
	}
	var scratch [reduceBlock]float32
	for lo := 0; lo < n; lo += reduceBlock {
		hi := min(lo+reduceBlock, n)
		acc := scratch[:hi-lo]
		addTo(acc, ins[0].f32[lo:hi], ins[1].f32[lo:hi])
		for _, in := range ins[2:last] {
			addTo(acc, acc, in.f32[lo:hi])
		}
		sumInto(outs, lo, hi, acc, ins[last].f32[lo:hi])
	}
}

// sumInto writes x + y into elements [lo, hi) of every output. Every input
// element of the range has been read when the first output is written.
func sumInto(outs []Buffer, lo, hi int, x, y []float32) {
	o0 := outs[0].f32[lo:hi]
	if len(outs) == 1 {
		addTo(o0, x, y)
		return
	}
	addDup(o0, outs[1].f32[lo:hi], x, y)
	for _, o := range outs[2:] {
		copy(o.f32[lo:hi], o0)
	}
}

func reduce16(op ReduceOp, outs, ins []Buffer, n int, widen func(uint16) float32, narrow func(float32) uint16) {
	var scratch [reduceBlock]float32
	var rounded [reduceBlock]uint16
	div := float32(len(ins))
	for lo := 0; lo < n; lo += reduceBlock {
		hi := min(lo+reduceBlock, n)
		acc := scratch[:hi-lo]
		x := ins[0].u16[lo:hi]
		for i := range acc {
			acc[i] = widen(x[i])
		}
		for _, in := range ins[1:] {
			x := in.u16[lo:hi]
			x = x[:len(acc)]
			switch op {
			case Sum, Avg:
				for i := range acc {
					acc[i] += widen(x[i])
				}
			case Max:
				for i := range acc {
					acc[i] = max(acc[i], widen(x[i]))
				}
			case Min:
				for i := range acc {
					acc[i] = min(acc[i], widen(x[i]))
				}
			}
		}
		r := rounded[:len(acc)]
		if op == Avg {
			for i := range acc {
				r[i] = narrow(acc[i] / div)
			}
		} else {
			for i := range acc {
				r[i] = narrow(acc[i])
			}
		}
		for _, o := range outs {
			copy(o.u16[lo:hi], r)
		}
	}
}

func reduceI64(op ReduceOp, outs, ins []Buffer, n int) {
	var scratch [reduceBlock]int64
	div := int64(len(ins))
	for lo := 0; lo < n; lo += reduceBlock {
		hi := min(lo+reduceBlock, n)
		acc := scratch[:hi-lo]
		copy(acc, ins[0].i64[lo:hi])
		for _, in := range ins[1:] {
			x := in.i64[lo:hi]
			x = x[:len(acc)]
			switch op {
			case Sum, Avg:
				for i := range acc {
					acc[i] += x[i]
				}
			case Max:
				for i := range acc {
					acc[i] = max(acc[i], x[i])
				}
			case Min:
				for i := range acc {
					acc[i] = min(acc[i], x[i])
				}
			}
		}
		if op == Avg {
			for i := range acc {
				acc[i] /= div
			}
		}
		for _, o := range outs {
			copy(o.i64[lo:hi], acc)
		}
	}
}
