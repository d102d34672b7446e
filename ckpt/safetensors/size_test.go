package safetensors

import (
	"bytes"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badShapes are headers whose shape has a negative dimension or whose element count or byte
// length overflows an int, several chosen so that the wrapped 64-bit byte length equals the
// span of the data_offsets exactly. Read must refuse each with an error naming the file and
// the tensor; FuzzRead starts from them too.
var badShapes = []struct {
	name   string
	header string
	data   int    // bytes of the data section
	want   string // substring of the error
}{
	{"2^62 x 4 F32, empty offsets",
		`{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, 0,
		"the product of its non-zero dimensions up to index 1 exceeds 9223372036854775807"},
	{"2^62 x 4 U8, empty offsets",
		`{"w":{"dtype":"U8","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, 0,
		"up to index 1 exceeds"},
	{"bytes wrap to the span: F32 2^62+1",
		`{"w":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}}`, 4,
		"4611686018427387905 elements of 4 bytes exceed 9223372036854775807 bytes"},
	{"bytes wrap to the span: F32 2 x (2^61+1)",
		`{"w":{"dtype":"F32","shape":[2,2305843009213693953],"data_offsets":[0,8]}}`, 8,
		"4611686018427387906 elements of 4 bytes exceed"},
	{"bytes wrap to the span: F64 2^61+1",
		`{"w":{"dtype":"F64","shape":[2305843009213693953],"data_offsets":[0,8]}}`, 8,
		"2305843009213693953 elements of 8 bytes exceed"},
	{"elements wrap to the span: U8 3 x (2^64+2)/3",
		`{"w":{"dtype":"U8","shape":[3,6148914691236517206],"data_offsets":[0,2]}}`, 2,
		"up to index 1 exceeds"},
	{"elements wrap to zero: F32 2^32 x 2^32",
		`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0,
		"up to index 1 exceeds"},
	{"elements wrap negative: U8 3037000500^2",
		`{"w":{"dtype":"U8","shape":[3037000500,3037000500],"data_offsets":[0,0]}}`, 0,
		"up to index 1 exceeds"},
	{"elements overflow after the first",
		`{"w":{"dtype":"U8","shape":[2,2,9223372036854775807],"data_offsets":[0,0]}}`, 0,
		"up to index 2 exceeds"},
	{"bytes overflow, elements fit: F32 2^61",
		`{"w":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,0]}}`, 0,
		"2305843009213693952 elements of 4 bytes exceed"},
	{"zero first, the rest overflows",
		`{"w":{"dtype":"U8","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}}`, 0,
		"up to index 2 exceeds"},
	{"zero last, the rest overflows",
		`{"w":{"dtype":"U8","shape":[9223372036854775807,2,0],"data_offsets":[0,0]}}`, 0,
		"up to index 1 exceeds"},
	{"zero, bytes of the rest overflow",
		`{"w":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}}`, 0,
		"4611686018427387904 elements of 4 bytes exceed"},
	{"negative dimension",
		`{"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}}`, 0,
		"dimension -1 (index 1) is negative"},
	{"two negative dimensions with a positive product",
		`{"w":{"dtype":"F32","shape":[-2,-2],"data_offsets":[0,16]}}`, 16,
		"dimension -2 (index 0) is negative"},
	{"most negative dimension",
		`{"w":{"dtype":"U8","shape":[-9223372036854775808],"data_offsets":[0,0]}}`, 0,
		"dimension -9223372036854775808 (index 0) is negative"},
	{"negative dimension times zero",
		`{"w":{"dtype":"U8","shape":[0,-1],"data_offsets":[0,0]}}`, 0,
		"dimension -1 (index 1) is negative"},
	{"dimension beyond int64",
		`{"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}}`, 0,
		"malformed JSON header"},
	{"dimension 2^64+4 that wraps to 4",
		`{"w":{"dtype":"U8","shape":[18446744073709551620],"data_offsets":[0,4]}}`, 4,
		"malformed JSON header"},
	{"fractional dimension",
		`{"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 1,
		"malformed JSON header"},
}

func TestReadRefusesBadShapes(t *testing.T) {
	for _, c := range badShapes {
		t.Run(c.name, func(t *testing.T) {
			raw := handFile(c.header, make([]byte, c.data), true)
			f, err := Read(bytes.NewReader(raw), int64(len(raw)), "big.safetensors")
			if err == nil {
				t.Fatalf("Read accepted %s as %v", c.header, f.Tensors)
			}
			for _, w := range []string{"big.safetensors: ", `tensor "w"`, c.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestReadFileRefusesBadShape(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.safetensors")
	if err := os.WriteFile(p, handFile(badShapes[0].header, nil, true), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(p)
	if want := p + `: tensor "w" of dtype F32 has shape [4611686018427387904 4]: the product`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestReadAcceptsLargestShapes covers shapes at the limit: a zero dimension makes the
// element count 0 as long as the other dimensions' product and byte length fit in an int.
func TestReadAcceptsLargestShapes(t *testing.T) {
	for _, header := range []string{
		`{"w":{"dtype":"U8","shape":[0,9223372036854775807],"data_offsets":[0,0]}}`,
		`{"w":{"dtype":"F64","shape":[1152921504606846975,0],"data_offsets":[0,0]}}`,
		`{"w":{"dtype":"F32","shape":[0,3,768614336404564650],"data_offsets":[0,0]}}`,
	} {
		raw := handFile(header, nil, true)
		f, err := Read(bytes.NewReader(raw), int64(len(raw)), "edge.safetensors")
		if err != nil {
			t.Errorf("%s: %v", header, err)
			continue
		}
		if w, _ := f.Get("w"); w.NumElements() != 0 || len(w.Data) != 0 {
			t.Errorf("%s: %d elements, %d bytes", header, w.NumElements(), len(w.Data))
		}
	}
}

// TestShapeSizeMatchesBigInt compares shapeSize with arbitrary-precision arithmetic on
// every shape of up to three dimensions drawn from values at the edges of overflow.
func TestShapeSizeMatchesBigInt(t *testing.T) {
	dims := []int{0, 1, 2, 3, 7, 8, 1 << 31, 1 << 32, 1<<32 + 1, 3037000499, 3037000500,
		1<<61 - 1, 1 << 61, 1<<61 + 1, 1 << 62, 1<<62 + 1, math.MaxInt, -1, math.MinInt}
	limit := big.NewInt(math.MaxInt)
	check := func(shape []int) {
		for _, size := range []int{1, 2, 4, 8} {
			numel, nbytes, err := shapeSize(shape, size)
			nonZero, zero, negative := big.NewInt(1), false, false
			for _, d := range shape {
				switch {
				case d < 0:
					negative = true
				case d == 0:
					zero = true
				default:
					nonZero.Mul(nonZero, big.NewInt(int64(d)))
				}
			}
			bytesNZ := new(big.Int).Mul(nonZero, big.NewInt(int64(size)))
			valid := !negative && nonZero.Cmp(limit) <= 0 && bytesNZ.Cmp(limit) <= 0
			if valid != (err == nil) {
				t.Fatalf("shapeSize(%v, %d): error %v, want valid=%v", shape, size, err, valid)
			}
			if !valid {
				continue
			}
			wantNumel, wantBytes := nonZero.Int64(), bytesNZ.Int64()
			if zero {
				wantNumel, wantBytes = 0, 0
			}
			if numel != wantNumel || nbytes != wantBytes {
				t.Fatalf("shapeSize(%v, %d) = %d, %d, want %d, %d", shape, size, numel, nbytes, wantNumel, wantBytes)
			}
		}
	}
	check(nil)
	for _, a := range dims {
		check([]int{a})
		for _, b := range dims {
			check([]int{a, b})
			for _, c := range dims {
				check([]int{a, b, c})
			}
		}
	}
}

// TestInvalidShapesOutsideRead checks that Write, Float32, NumElements and F32 refuse or
// report invalid shapes without overflowing or panicking with a runtime error.
func TestInvalidShapesOutsideRead(t *testing.T) {
	for _, shape := range [][]int{{2, -1}, {-2, -2}, {0, math.MaxInt, 2}, {1 << 62, 4}, {1<<62 + 1}} {
		tn := Tensor{Name: "w", DType: DTypeF32, Shape: shape, Data: make([]byte, 4)}
		if err := Write(io.Discard, []Tensor{tn}, nil); err == nil || !strings.Contains(err.Error(), "fix the shape") {
			t.Errorf("Write of shape %v: %v", shape, err)
		}
		if _, err := tn.Float32(); err == nil || !strings.Contains(err.Error(), "fix the shape") {
			t.Errorf("Float32 of shape %v: %v", shape, err)
		}
		if n := tn.NumElements(); n != 0 {
			t.Errorf("NumElements of shape %v = %d, want 0", shape, n)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "safetensors.F32") {
					t.Errorf("F32 with shape %v: panic %v, want the package's message", shape, r)
				}
			}()
			F32("w", shape, make([]float32, 1))
		}()
	}
}
