package comm

import "fmt"

// DType is the element type of a Buffer. The zero value is invalid: a zero
// Buffer{} has no type and every operation rejects it (use F32(nil) for an
// empty float32 buffer).
//
// Why not tensor.DType: collectives also carry integers (Int64: generator
// states, counts, flags), the zero value must be invalid so that an unset
// Buffer is caught, and package comm does not depend on the tensor package.
type DType int

// The element types a collective can carry. BFloat16 and Float16 are
// storage and communication types: reductions accumulate them in float32.
const (
	Float32  DType = iota + 1 // IEEE binary32
	BFloat16                  // bfloat16: the high 16 bits of a binary32
	Float16                   // IEEE binary16
	Int64                     // two's complement 64-bit integer
)

// String returns "float32", "bfloat16", "float16" or "int64", or "DType(n)"
// for an invalid value.
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Float16:
		return "float16"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Valid reports whether d is one of the named element types.
func (d DType) Valid() bool { return d >= Float32 && d <= Int64 }

// Size returns the size of one element in bytes (4, 2, 2, 8), or 0 for an
// invalid DType.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case BFloat16, Float16:
		return 2
	case Int64:
		return 8
	}
	return 0
}

// Buffer is a typed slice handed to a collective. It is a small value (pass
// it by value); it refers to the caller's memory and never copies it. A
// Buffer holds exactly one of a []float32, a []uint16 (bfloat16 or float16
// bits) or a []int64, chosen by its constructor.
type Buffer struct {
	dtype DType
	f32   []float32
	u16   []uint16
	i64   []int64
}

// F32 returns a Float32 Buffer over s.
func F32(s []float32) Buffer { return Buffer{dtype: Float32, f32: s} }

// BF16 returns a BFloat16 Buffer over s, each element holding bfloat16 bits.
func BF16(s []uint16) Buffer { return Buffer{dtype: BFloat16, u16: s} }

// F16 returns a Float16 Buffer over s, each element holding IEEE binary16
// bits.
func F16(s []uint16) Buffer { return Buffer{dtype: Float16, u16: s} }

// I64 returns an Int64 Buffer over s.
func I64(s []int64) Buffer { return Buffer{dtype: Int64, i64: s} }

// NewBuffer returns a Buffer of n zero elements of type d (an Int64
// Buffer for an invalid d).
func NewBuffer(d DType, n int) Buffer {
	switch d {
	case Float32:
		return F32(make([]float32, n))
	case BFloat16:
		return BF16(make([]uint16, n))
	case Float16:
		return F16(make([]uint16, n))
	}
	return I64(make([]int64, n))
}

// DType returns the element type; 0 (invalid) for the zero Buffer.
func (b Buffer) DType() DType { return b.dtype }

// Len returns the number of elements.
func (b Buffer) Len() int {
	switch b.dtype {
	case Float32:
		return len(b.f32)
	case BFloat16, Float16:
		return len(b.u16)
	case Int64:
		return len(b.i64)
	}
	return 0
}

// Bytes returns Len()·DType().Size().
func (b Buffer) Bytes() int { return b.Len() * b.dtype.Size() }

// Float32s returns the []float32 of a Float32 Buffer, nil otherwise.
func (b Buffer) Float32s() []float32 { return b.f32 }

// Uint16s returns the []uint16 of a BFloat16 or Float16 Buffer, nil
// otherwise.
func (b Buffer) Uint16s() []uint16 { return b.u16 }

// Int64s returns the []int64 of an Int64 Buffer, nil otherwise.
func (b Buffer) Int64s() []int64 { return b.i64 }

// Slice returns the Buffer of elements [lo, hi), sharing memory with b. It
// panics if the bounds are out of range, as slicing does.
func (b Buffer) Slice(lo, hi int) Buffer {
	switch b.dtype {
	case Float32:
		b.f32 = b.f32[lo:hi:hi]
	case BFloat16, Float16:
		b.u16 = b.u16[lo:hi:hi]
	case Int64:
		b.i64 = b.i64[lo:hi:hi]
	default:
		if lo != 0 || hi != 0 {
			panic(fmt.Sprintf("comm: Slice(%d, %d) of a zero Buffer", lo, hi))
		}
	}
	return b
}

// CopyFrom copies src into b element by element and returns the number of
// elements copied, min(b.Len(), src.Len()), as the built-in copy does. It
// panics if the dtypes differ (a programmer bug).
func (b Buffer) CopyFrom(src Buffer) int {
	if b.dtype != src.dtype {
		panic(fmt.Sprintf("comm: CopyFrom a %v Buffer into a %v Buffer", src.dtype, b.dtype))
	}
	switch b.dtype {
	case Float32:
		return copy(b.f32, src.f32)
	case BFloat16, Float16:
		return copy(b.u16, src.u16)
	case Int64:
		return copy(b.i64, src.i64)
	}
	return 0
}

// String describes the buffer as "float32[12]".
func (b Buffer) String() string { return fmt.Sprintf("%v[%d]", b.dtype, b.Len()) }
