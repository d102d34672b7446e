package config

import (
	"fmt"
	"strings"
)

// DType names a floating-point element type in a configuration: the type of
// parameters, of pipeline messages, of autocast. gotron computes in float32;
// bfloat16 and float16 are storage and communication types (package
// tensor's doc; docs/DECISIONS.md, "Mixed precision").
//
// The zero value, DTypeNone, is the reference's None: "not set". Fields whose
// reference default is None (pipeline_dtype, autocast_dtype) start as
// DTypeNone; Finalize or Validate say what an unset value means for each.
//
// Why not tensor.DType: a config must say "not set", which a tensor's type
// never is, and package config stays free of the tensor package (and of its
// cgo libraries), so that tools that only read configs (gotron inspect, the
// planner) link none of them. comm.DType and tensor.DType are the other two
// in-memory element types; each says why it is its own.
type DType uint8

// The element types a config can name.
const (
	DTypeNone DType = iota // not set (the reference's None)
	Float32                // IEEE binary32, torch.float32
	BFloat16               // bfloat16, torch.bfloat16
	Float16                // IEEE binary16, torch.float16
)

// String returns the canonical name: "float32", "bfloat16", "float16", or
// "none" for DTypeNone. An out-of-range value prints as "DType(n)".
func (d DType) String() string {
	switch d {
	case DTypeNone:
		return "none"
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Float16:
		return "float16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Valid reports whether d is one of the named constants (DTypeNone included).
func (d DType) Valid() bool { return d <= Float16 }

// Size returns the size of one element in bytes: 4 for Float32, 2 for
// BFloat16 and Float16, 0 for DTypeNone or an invalid value.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case BFloat16, Float16:
		return 2
	}
	return 0
}

// ParseDType parses a dtype name, case-insensitively. It accepts the canonical
// names, the short forms used by Megatron-LM's command line, and PyTorch's
// spellings:
//
//	float32:  "float32", "fp32", "float", "torch.float32", "torch.float"
//	bfloat16: "bfloat16", "bf16", "torch.bfloat16"
//	float16:  "float16", "fp16", "half", "torch.float16", "torch.half"
//	none:     "", "none", "null"
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "null":
		return DTypeNone, nil
	case "float32", "fp32", "float", "torch.float32", "torch.float":
		return Float32, nil
	case "bfloat16", "bf16", "torch.bfloat16":
		return BFloat16, nil
	case "float16", "fp16", "half", "torch.float16", "torch.half":
		return Float16, nil
	}
	return DTypeNone, fmt.Errorf("config: unknown dtype %q: use float32 (fp32), bfloat16 (bf16) or float16 (fp16)", s)
}

// MarshalText encodes d as its canonical name, with DTypeNone as the empty
// string. It fails for an out-of-range value.
func (d DType) MarshalText() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("config: cannot encode invalid dtype %d", uint8(d))
	}
	if d == DTypeNone {
		return []byte{}, nil
	}
	return []byte(d.String()), nil
}

// UnmarshalText decodes any spelling ParseDType accepts.
func (d *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
