package commtest

import (
	"fmt"
	"math"
	"math/big"

	"github.com/gotron/gotron/comm"
)

// The suite's data are a pure function of (seed, rank, index), so each rank
// can build every other rank's input and compute the expected result alone
// with plain loops, as one process of a multi-process backend must.

var dtypes = []comm.DType{comm.Float32, comm.BFloat16, comm.Float16, comm.Int64}

var reduceOps = []comm.ReduceOp{comm.Sum, comm.Avg, comm.Max, comm.Min}

// mix is splitmix64's finaliser over the three inputs.
func mix(seed uint64, rank, i int) uint64 {
	z := seed*0x9e3779b97f4a7c15 + uint64(rank+1)*0xbf58476d1ce4e5b9 + uint64(i+1)*0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// gen returns rank's n-element input of dtype dt. Floats have random signs
// and mantissas and exponents spread over [1/8, 8), so sums round and their
// order matters; float16 values are positive so every sum stays in its normal
// range; integers lie in ±2⁴⁰.
func gen(dt comm.DType, seed uint64, rank, n int) comm.Buffer {
	switch dt {
	case comm.Float32:
		s := make([]float32, n)
		for i := range s {
			h := mix(seed, rank, i)
			exp := uint32(124 + h%7)
			s[i] = math.Float32frombits(uint32(h>>8)&0x80000000 | exp<<23 | uint32(h>>20)&0x7fffff)
		}
		return comm.F32(s)
	case comm.BFloat16:
		s := make([]uint16, n)
		for i := range s {
			h := mix(seed, rank, i)
			exp := uint16(124 + h%7)
			s[i] = uint16(h>>8)&0x8000 | exp<<7 | uint16(h>>20)&0x7f
		}
		return comm.BF16(s)
	case comm.Float16:
		s := make([]uint16, n)
		for i := range s {
			h := mix(seed, rank, i)
			exp := uint16(12 + h%7)
			s[i] = exp<<10 | uint16(h>>20)&0x3ff
		}
		return comm.F16(s)
	case comm.Int64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(mix(seed, rank, i)>>23) - 1<<40
		}
		return comm.I64(s)
	}
	panic(fmt.Sprintf("commtest: gen of %v", dt))
}

// zeros returns an n-element buffer of dtype dt filled with a marker value
// that no reduction of gen's data produces.
func zeros(dt comm.DType, n int) comm.Buffer {
	switch dt {
	case comm.Float32:
		s := make([]float32, n)
		for i := range s {
			s[i] = -12345
		}
		return comm.F32(s)
	case comm.BFloat16, comm.Float16:
		s := make([]uint16, n)
		for i := range s {
			s[i] = 0x7bad
		}
		if dt == comm.BFloat16 {
			return comm.BF16(s)
		}
		return comm.F16(s)
	case comm.Int64:
		s := make([]int64, n)
		for i := range s {
			s[i] = math.MinInt64 + 7
		}
		return comm.I64(s)
	}
	panic(fmt.Sprintf("commtest: zeros of %v", dt))
}

// widen16 decodes bfloat16 or float16 bits, written out from the formats'
// definitions rather than with comm's helpers.
func widen16(dt comm.DType, h uint16) float32 {
	if dt == comm.BFloat16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return float32(sign * math.Ldexp(m, -24))
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		return float32(math.Inf(int(sign)))
	}
	return float32(sign * math.Ldexp(1+m/1024, e-15))
}

// narrow16 rounds x to bfloat16 or float16 bits, to nearest with ties to
// even, through math/big at the format's precision (8 or 11 bits). It is
// exact for results in the formats' normal ranges, which gen's data keep to.
func narrow16(dt comm.DType, x float32) uint16 {
	prec := uint(8)
	if dt == comm.Float16 {
		prec = 11
	}
	r, _ := new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).SetFloat64(float64(x)).Float64()
	if dt == comm.BFloat16 {
		return uint16(math.Float32bits(float32(r)) >> 16)
	}
	if r == 0 {
		return uint16(math.Float32bits(float32(r))>>16) & 0x8000
	}
	var sign uint16
	if r < 0 {
		sign, r = 0x8000, -r
	}
	frac, exp := math.Frexp(r) // r = frac·2^exp, frac in [0.5, 1)
	return sign | uint16(exp-1+15)<<10 | uint16(math.Round((frac*2-1)*1024))
}

// refReduce is the serial reference of a reduction: element by element,
// inputs folded in rank order, float32 accumulation for the 16-bit types,
// one rounding at the end, Avg dividing the sum once.
func refReduce(op comm.ReduceOp, ins []comm.Buffer) comm.Buffer {
	dt, n, k := ins[0].DType(), ins[0].Len(), len(ins)
	switch dt {
	case comm.Float32:
		out := make([]float32, n)
		for i := range out {
			acc := ins[0].Float32s()[i]
			for _, in := range ins[1:] {
				acc = fold(op, acc, in.Float32s()[i])
			}
			if op == comm.Avg {
				acc /= float32(k)
			}
			out[i] = acc
		}
		return comm.F32(out)
	case comm.BFloat16, comm.Float16:
		out := make([]uint16, n)
		for i := range out {
			acc := widen16(dt, ins[0].Uint16s()[i])
			for _, in := range ins[1:] {
				acc = fold(op, acc, widen16(dt, in.Uint16s()[i]))
			}
			if op == comm.Avg {
				acc /= float32(k)
			}
			out[i] = narrow16(dt, acc)
		}
		if dt == comm.BFloat16 {
			return comm.BF16(out)
		}
		return comm.F16(out)
	case comm.Int64:
		out := make([]int64, n)
		for i := range out {
			acc := ins[0].Int64s()[i]
			for _, in := range ins[1:] {
				acc = fold(op, acc, in.Int64s()[i])
			}
			if op == comm.Avg {
				acc /= int64(k)
			}
			out[i] = acc
		}
		return comm.I64(out)
	}
	panic(fmt.Sprintf("commtest: refReduce of %v", dt))
}

func fold[T float32 | int64](op comm.ReduceOp, acc, x T) T {
	switch op {
	case comm.Max:
		if x > acc {
			return x
		}
		return acc
	case comm.Min:
		if x < acc {
			return x
		}
		return acc
	}
	return acc + x
}

// same returns nil if got and want hold the same bits, else an error naming
// the first differing element.
func same(what string, got, want comm.Buffer) error {
	if got.DType() != want.DType() || got.Len() != want.Len() {
		return fmt.Errorf("%s: got %v, want %v", what, got, want)
	}
	for i := range got.Len() {
		var g, w any
		switch got.DType() {
		case comm.Float32:
			a, b := got.Float32s()[i], want.Float32s()[i]
			if math.Float32bits(a) == math.Float32bits(b) {
				continue
			}
			g, w = a, b
		case comm.BFloat16, comm.Float16:
			a, b := got.Uint16s()[i], want.Uint16s()[i]
			if a == b {
				continue
			}
			g, w = fmt.Sprintf("%#04x (%g)", a, widen16(got.DType(), a)), fmt.Sprintf("%#04x (%g)", b, widen16(got.DType(), b))
		case comm.Int64:
			a, b := got.Int64s()[i], want.Int64s()[i]
			if a == b {
				continue
			}
			g, w = a, b
		}
		return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, got.Len(), g, w)
	}
	return nil
}

// concat joins buffers of one dtype.
func concat(dt comm.DType, bs []comm.Buffer) comm.Buffer {
	n := 0
	for _, b := range bs {
		n += b.Len()
	}
	out := zeros(dt, n)
	off := 0
	for _, b := range bs {
		out.Slice(off, off+b.Len()).CopyFrom(b)
		off += b.Len()
	}
	return out
}

// sum returns Σ xs.
func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
