package safetensors

// DType is a safetensors element type, spelled as in the file header ("F32", "BF16", ...).
type DType string

// The element types of the safetensors format. gotron computes in F32 and stores in F32,
// BF16 or F16; the others are read and written as raw bytes.
const (
	DTypeBool   DType = "BOOL"
	DTypeU8     DType = "U8"
	DTypeI8     DType = "I8"
	DTypeF8E5M2 DType = "F8_E5M2"
	DTypeF8E4M3 DType = "F8_E4M3"
	DTypeI16    DType = "I16"
	DTypeU16    DType = "U16"
	DTypeF16    DType = "F16"
	DTypeBF16   DType = "BF16"
	DTypeI32    DType = "I32"
	DTypeU32    DType = "U32"
	DTypeF32    DType = "F32"
	DTypeF64    DType = "F64"
	DTypeI64    DType = "I64"
	DTypeU64    DType = "U64"
)

// ElemSize returns the size of one element of d in bytes, or 0 if d is not a dtype of the
// safetensors format.
func (d DType) ElemSize() int {
	switch d {
	case DTypeBool, DTypeU8, DTypeI8, DTypeF8E5M2, DTypeF8E4M3:
		return 1
	case DTypeI16, DTypeU16, DTypeF16, DTypeBF16:
		return 2
	case DTypeI32, DTypeU32, DTypeF32:
		return 4
	case DTypeF64, DTypeI64, DTypeU64:
		return 8
	}
	return 0
}

// Valid reports whether d is a dtype of the safetensors format.
func (d DType) Valid() bool { return d.ElemSize() != 0 }

// knownDTypes lists the dtypes for error messages, in the order of the format's table.
const knownDTypes = "BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64"
