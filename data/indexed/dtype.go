package indexed

import (
	"fmt"
	"math"
)

// DType is the element type of the tokens in a .bin file, stored as one byte at offset 17
// of the .idx. The codes are Megatron's (indexed_dataset.py's DType enum), so files move
// between gotron and Megatron unchanged.
type DType uint8

// The token dtypes and their codes.
const (
	Uint8   DType = 1
	Int8    DType = 2
	Int16   DType = 3
	Int32   DType = 4
	Int64   DType = 5
	Float64 DType = 6
	Float32 DType = 7
	Uint16  DType = 8
)

// dtypeInfo describes one dtype: its NumPy name, its size in bytes and the int32 token
// ids it represents exactly, [min, max].
type dtypeInfo struct {
	name     string
	size     int
	min, max int64
}

// dtypes is indexed by code; the zero entry (size 0) marks an unknown code.
var dtypes = [...]dtypeInfo{
	Uint8:   {"uint8", 1, 0, math.MaxUint8},
	Int8:    {"int8", 1, math.MinInt8, math.MaxInt8},
	Int16:   {"int16", 2, math.MinInt16, math.MaxInt16},
	Int32:   {"int32", 4, math.MinInt32, math.MaxInt32},
	Int64:   {"int64", 8, math.MinInt32, math.MaxInt32},
	Float64: {"float64", 8, math.MinInt32, math.MaxInt32},
	Float32: {"float32", 4, -1 << 24, 1 << 24},
	Uint16:  {"uint16", 2, 0, math.MaxUint16},
}

// knownCodes lists the codes for error messages.
const knownCodes = "1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16"

func (d DType) info() dtypeInfo {
	if int(d) < len(dtypes) {
		return dtypes[d]
	}
	return dtypeInfo{}
}

// Valid reports whether d is one of the eight known codes.
func (d DType) Valid() bool { return d.info().size != 0 }

// String returns the NumPy name of the dtype ("uint16"), or "DType(n)" for an unknown code.
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return d.info().name
}

// Size returns the size of one token in bytes (1, 2, 4 or 8), or 0 for an unknown code.
func (d DType) Size() int { return d.info().size }

// TokenRange returns the smallest and largest int32 token id the dtype stores exactly:
// the dtype's own range for the integer types narrower than 32 bits, the whole int32
// range for int32, int64 and float64, and ±2²⁴ for float32 (whose 24-bit significand
// holds every integer up to 2²⁴ but not all above).
func (d DType) TokenRange() (lo, hi int32) {
	i := d.info()
	return int32(i.min), int32(i.max)
}

// OptimalDType returns the dtype Megatron's preprocess_data.py chooses for a vocabulary of
// vocab token ids (DType.optimal_dtype): uint16 when vocab < 65500, else int32.
func OptimalDType(vocab int) DType {
	if vocab < 65500 {
		return Uint16
	}
	return Int32
}
