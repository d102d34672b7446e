package comm

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// roundBig rounds x to prec significant bits, to nearest with ties to even,
// through math/big: the reference for the normal ranges of bfloat16 (8 bits)
// and float16 (11 bits).
func roundBig(x float32, prec uint) float32 {
	r, _ := new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).SetFloat64(float64(x)).Float32()
	return r
}

func TestBF16Conversions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		var x float32
		switch i % 3 {
		case 0: // random bits in the normal range
			x = math.Float32frombits(rng.Uint32()&0x807fffff | (1+rng.Uint32N(253))<<23)
		case 1: // exact ties between two bfloat16 values
			x = math.Float32frombits(rng.Uint32()&0x807f0000 | (1+rng.Uint32N(253))<<23 | 0x8000)
		default: // small integers and their halves
			x = float32(rng.IntN(1<<12)-1<<11) / 2
		}
		want := math.Float32bits(roundBig(x, 8)) >> 16
		if got := F32ToBF16(x); uint32(got) != want {
			t.Fatalf("F32ToBF16(%g = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
		if h := uint16(want); BF16ToF32(h) != roundBig(x, 8) {
			t.Fatalf("BF16ToF32(%#04x) = %g, want %g", h, BF16ToF32(h), roundBig(x, 8))
		}
	}
	for _, x := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1))} {
		if got := BF16ToF32(F32ToBF16(x)); math.Float32bits(got) != math.Float32bits(x) {
			t.Errorf("bfloat16 round trip of %g gave %g", x, got)
		}
	}
	nan := math.Float32frombits(0x7f800001) // a NaN whose payload truncation would make Inf
	if got := BF16ToF32(F32ToBF16(nan)); !math.IsNaN(float64(got)) {
		t.Errorf("F32ToBF16(NaN) widened to %g, want NaN", got)
	}
}

// f16Ref returns the float16 bits of x by the format's definition: normal
// values rounded at 11 bits, subnormals to the nearest even multiple of
// 2⁻²⁴, overflow to infinity.
func f16Ref(x float32) uint16 {
	var sign uint16
	if math.Signbit(float64(x)) {
		sign, x = 0x8000, -x
	}
	switch {
	case x >= 65520: // halfway between 65504 and 65536 rounds to even: up
		return sign | 0x7c00
	case x < 1.0/(1<<14):
		return sign | uint16(math.RoundToEven(float64(x)*(1<<24)))
	}
	r := float64(roundBig(x, 11))
	if r >= 65536 {
		return sign | 0x7c00
	}
	frac, exp := math.Frexp(r)
	return sign | uint16(exp-1+15)<<10 | uint16((frac*2-1)*1024)
}

func TestF16Conversions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200000 {
		var x float32
		switch i % 3 {
		case 0: // random bits across float16's range, subnormals and overflow included
			x = math.Float32frombits(rng.Uint32()&0x807fffff | (98+rng.Uint32N(50))<<23)
		case 1: // exact ties between two float16 values
			x = F16ToF32(uint16(rng.Uint32N(0x7bff))) + 0
			x = math.Float32frombits(math.Float32bits(x) | 1<<12)
		default:
			x = float32(rng.IntN(1<<14)-1<<13) / 4
		}
		if got, want := F32ToF16(x), f16Ref(x); got != want {
			t.Fatalf("F32ToF16(%g) = %#04x, want %#04x", x, got, want)
		}
	}
	for h := range uint32(0x10000) { // every float16 widens by the format's definition
		e, m := int(h>>10&0x1f), float64(h&0x3ff)
		want := math.Ldexp(1+m/1024, e-15)
		switch {
		case e == 0:
			want = math.Ldexp(m, -24)
		case e == 31 && m == 0:
			want = math.Inf(1)
		case e == 31:
			want = math.NaN()
		}
		if h&0x8000 != 0 {
			want = -want
		}
		got := F16ToF32(uint16(h))
		if !(float64(got) == want || math.IsNaN(want) && math.IsNaN(float64(got))) || math.Signbit(float64(got)) != (h&0x8000 != 0) {
			t.Fatalf("F16ToF32(%#04x) = %g, want %g", h, got, want)
		}
	}
	for h := range uint32(0x7c00) { // every finite non-negative float16 widens and narrows back
		x := F16ToF32(uint16(h))
		if F32ToF16(x) != uint16(h) || F32ToF16(-x) != uint16(h)|0x8000 {
			t.Fatalf("float16 %#04x → %g does not round-trip", h, x)
		}
	}
}

// plainAdd is the loop addTo and addDup must match.
func plainAdd(x, y []float32) []float32 {
	out := make([]float32, len(x))
	for i := range x {
		out[i] = x[i] + y[i]
	}
	return out
}

func randF32(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = math.Float32frombits(rng.Uint32()&0x807fffff | (120+rng.Uint32N(15))<<23)
	}
	return s
}

// addImpl is one implementation of the addition kernels.
type addImpl struct {
	name string
	to   func(dst, x, y []float32)
	dup  func(d0, d1, x, y []float32)
}

// TestAddKernels checks every addition kernel against plainAdd for every
// length through the unrolled loops and the tails, at every alignment of
// a float32 within 16 bytes, out of place and in place. It also checks that
// no element past len(dst) is written.
func TestAddKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	impls := addImpls()
	for _, impl := range impls {
		for n := range 100 {
			for off := range 4 {
				x, y := randF32(rng, n+off)[off:], randF32(rng, n+off)[off:]
				want := plainAdd(x, y)
				const guard = 3
				dst := make([]float32, off+n+guard)[off:]
				impl.to(dst[:n], x, y)
				if err := sameF32(dst, want); err != nil {
					t.Fatalf("%s addTo, n=%d, offset %d: %v", impl.name, n, off, err)
				}
				if err := zeroF32(dst[n:]); err != nil {
					t.Fatalf("%s addTo, n=%d, offset %d, past the end: %v", impl.name, n, off, err)
				}
				d0 := make([]float32, off+n+guard)[off:]
				d1 := make([]float32, n+guard)
				impl.dup(d0[:n], d1, x, y)
				for _, d := range [][]float32{d0, d1} {
					if err := sameF32(d, want); err != nil {
						t.Fatalf("%s addDup, n=%d, offset %d: %v", impl.name, n, off, err)
					}
					if err := zeroF32(d[n:]); err != nil {
						t.Fatalf("%s addDup, n=%d, offset %d, past the end: %v", impl.name, n, off, err)
					}
				}
				// In place, as an all-reduce of two ranks runs it.
				xa, ya := append([]float32(nil), x...), append([]float32(nil), y...)
				impl.dup(xa, ya, xa, ya)
				if err := sameF32(xa, want); err != nil {
					t.Fatalf("%s addDup in place, n=%d: %v", impl.name, n, err)
				}
				if err := sameF32(ya, want); err != nil {
					t.Fatalf("%s addDup in place, n=%d: %v", impl.name, n, err)
				}
				xa = append([]float32(nil), x...)
				impl.to(xa, xa, y)
				if err := sameF32(xa, want); err != nil {
					t.Fatalf("%s addTo in place, n=%d: %v", impl.name, n, err)
				}
			}
		}
	}
}

func zeroF32(s []float32) error {
	for i, v := range s {
		if v != 0 {
			return fmt.Errorf("element %d is %g, want it untouched (0)", i, v)
		}
	}
	return nil
}

func sameF32(got, want []float32) error {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Errorf("element %d is %g, want %g", i, got[i], want[i])
		}
	}
	return nil
}

// serialReduce is the reference: element by element, inputs in order,
// float32 accumulation, one rounding.
func serialReduce(op ReduceOp, ins []Buffer) Buffer {
	n, k := ins[0].Len(), len(ins)
	switch ins[0].DType() {
	case Float32, BFloat16, Float16:
		wide := func(b Buffer, i int) float32 {
			switch b.DType() {
			case BFloat16:
				return math.Float32frombits(uint32(b.Uint16s()[i]) << 16)
			case Float16:
				return F16ToF32(b.Uint16s()[i])
			}
			return b.Float32s()[i]
		}
		f := make([]float32, n)
		for i := range f {
			a := wide(ins[0], i)
			for _, in := range ins[1:] {
				x := wide(in, i)
				switch op {
				case Max:
					if x > a {
						a = x
					}
				case Min:
					if x < a {
						a = x
					}
				default:
					a += x
				}
			}
			if op == Avg {
				a /= float32(k)
			}
			f[i] = a
		}
		switch ins[0].DType() {
		case BFloat16:
			u := make([]uint16, n)
			for i := range u {
				u[i] = uint16(math.Float32bits(roundBig(f[i], 8)) >> 16)
			}
			return BF16(u)
		case Float16:
			u := make([]uint16, n)
			for i := range u {
				u[i] = f16Ref(f[i])
			}
			return F16(u)
		}
		return F32(f)
	}
	s := make([]int64, n)
	for i := range s {
		a := ins[0].Int64s()[i]
		for _, in := range ins[1:] {
			x := in.Int64s()[i]
			switch op {
			case Max:
				a = max(a, x)
			case Min:
				a = min(a, x)
			default:
				a += x
			}
		}
		if op == Avg {
			a /= int64(k)
		}
		s[i] = a
	}
	return I64(s)
}

func randBuf(rng *rand.Rand, dt DType, n int) Buffer {
	switch dt {
	case Float32:
		return F32(randF32(rng, n))
	case BFloat16, Float16:
		u := make([]uint16, n)
		for i := range u {
			if dt == BFloat16 {
				u[i] = F32ToBF16(randF32(rng, 1)[0])
			} else {
				u[i] = uint16(rng.Uint32N(0x7800)) + 0x400 | uint16(rng.Uint32N(2))<<15
			}
		}
		if dt == BFloat16 {
			return BF16(u)
		}
		return F16(u)
	}
	s := make([]int64, n)
	for i := range s {
		s[i] = rng.Int64() >> 3
	}
	return I64(s)
}

func clone(b Buffer) Buffer {
	switch b.DType() {
	case Float32:
		return F32(append([]float32(nil), b.Float32s()...))
	case BFloat16:
		return BF16(append([]uint16(nil), b.Uint16s()...))
	case Float16:
		return F16(append([]uint16(nil), b.Uint16s()...))
	}
	return I64(append([]int64(nil), b.Int64s()...))
}

func sameBits(a, b Buffer) bool {
	if a.DType() != b.DType() || a.Len() != b.Len() {
		return false
	}
	for i := range a.Len() {
		switch a.DType() {
		case Float32:
			if math.Float32bits(a.Float32s()[i]) != math.Float32bits(b.Float32s()[i]) {
				return false
			}
		case BFloat16, Float16:
			if a.Uint16s()[i] != b.Uint16s()[i] {
				return false
			}
		case Int64:
			if a.Int64s()[i] != b.Int64s()[i] {
				return false
			}
		}
	}
	return true
}

// TestReduce checks every dtype, op and input count, over lengths that
// cross the block size, with separate outputs and with outputs that are the
// inputs (an all-reduce in place).
func TestReduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []DType{Float32, BFloat16, Float16, Int64} {
		for _, op := range []ReduceOp{Sum, Avg, Max, Min} {
			for k := 1; k <= 5; k++ {
				for _, n := range []int{0, 1, 17, 2*reduceBlock + 3} {
					ins := make([]Buffer, k)
					for j := range ins {
						ins[j] = randBuf(rng, dt, n)
					}
					want := serialReduce(op, ins)
					outs := []Buffer{clone(ins[0]), clone(ins[0]), clone(ins[0])}
					Reduce(op, outs, ins)
					for j, o := range outs {
						if !sameBits(o, want) {
							t.Fatalf("Reduce(%v) of %d %v inputs of %d: output %d differs from the serial loop", op, k, dt, n, j)
						}
					}
					Reduce(op, ins, ins)
					for j, o := range ins {
						if !sameBits(o, want) {
							t.Fatalf("Reduce(%v) in place of %d %v inputs of %d: buffer %d differs from the serial loop", op, k, dt, n, j)
						}
					}
				}
			}
		}
	}
}

func TestReducePanicsOnMismatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Reduce of inputs of different lengths did not panic")
		}
	}()
	Reduce(Sum, nil, []Buffer{F32(make([]float32, 2)), F32(make([]float32, 3))})
}
