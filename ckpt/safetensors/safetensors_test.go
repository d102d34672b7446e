package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// handFile assembles a safetensors file from a header written by hand, padding the header
// with spaces to a multiple of 8 bytes when pad is set; it does not use the package's writer.
func handFile(header string, data []byte, pad bool) []byte {
	for pad && len(header)%8 != 0 {
		header += " "
	}
	out := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

// goldenHeader and goldenData describe a two-tensor file: a = F32 [1, -2], b = U8 scalar 7.
const goldenHeader = `{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[],"data_offsets":[8,9]}}`

var goldenData = []byte{
	0x00, 0x00, 0x80, 0x3f, // 1.0f: sign 0, exponent 127, mantissa 0
	0x00, 0x00, 0x00, 0xc0, // -2.0f: sign 1, exponent 128
	0x07,
}

func TestWriteGoldenBytes(t *testing.T) {
	want := handFile(goldenHeader, goldenData, true)
	if len(want) != 8+136+9 { // 129-byte header padded to 136
		t.Fatalf("hand-built file has %d bytes, want %d", len(want), 8+136+9)
	}
	tensors := []Tensor{ // deliberately not sorted
		{Name: "b", DType: DTypeU8, Shape: []int{}, Data: []byte{7}},
		F32("a", []int{2}, []float32{1, -2}),
	}
	var buf bytes.Buffer
	if err := Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write produced\n%q\nwant\n%q", buf.Bytes(), want)
	}
	path := filepath.Join(t.TempDir(), "g.safetensors")
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("WriteFile produced\n%q\nwant\n%q", got, want)
	}
}

func TestReadGoldenBytes(t *testing.T) {
	for _, pad := range []bool{true, false} {
		raw := handFile(goldenHeader, goldenData, pad)
		f, err := Read(bytes.NewReader(raw), int64(len(raw)), "golden")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Metadata, map[string]string{"format": "pt"}) {
			t.Errorf("metadata %v", f.Metadata)
		}
		if got := f.Names(); !reflect.DeepEqual(got, []string{"a", "b"}) {
			t.Fatalf("names %v", got)
		}
		a, _ := f.Get("a")
		v, err := a.Float32()
		if err != nil || !reflect.DeepEqual(v, []float32{1, -2}) || !reflect.DeepEqual(a.Shape, []int{2}) {
			t.Errorf("a = %v %v (%v)", a.Shape, v, err)
		}
		b, ok := f.Get("b")
		if !ok || b.DType != DTypeU8 || len(b.Shape) != 0 || !bytes.Equal(b.Data, []byte{7}) || b.NumElements() != 1 {
			t.Errorf("b = %+v", b)
		}
		if _, ok := f.Get("c"); ok {
			t.Error("Get(c) found a tensor")
		}
	}
}

func TestRoundTrip(t *testing.T) {
	bf16 := []byte{0x80, 0x3f, 0x00, 0xc0, 0x49, 0x40} // 1, -2, 3.140625 (0x4049)
	f16 := []byte{0x00, 0x3c, 0x00, 0x38, 0xff, 0x7b}  // 1, 0.5, 65504 (max half)
	in := []Tensor{
		F32("decoder.layers.0.mlp.linear_fc1.weight", []int{2, 3}, []float32{1, 2, 3, -4, 5.5, float32(math.Inf(1))}),
		{Name: "bf", DType: DTypeBF16, Shape: []int{3}, Data: bf16},
		{Name: "half", DType: DTypeF16, Shape: []int{3, 1}, Data: f16},
		{Name: "empty", DType: DTypeF32, Shape: []int{0, 4}, Data: []byte{}},
		{Name: "ids", DType: DTypeI64, Shape: []int{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{Name: "flag", DType: DTypeBool, Shape: []int{1}, Data: []byte{1}},
		{Name: "x<&>\"é", DType: DTypeU8, Shape: []int{1, 1, 1}, Data: []byte{200}},
	}
	meta := map[string]string{"iteration": "10", "quote\"": "a<b>&c"}
	path := filepath.Join(t.TempDir(), "rt.safetensors")
	if err := WriteFile(path, in, meta); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != path || !reflect.DeepEqual(f.Metadata, meta) || len(f.Tensors) != len(in) {
		t.Fatalf("file %q meta %v with %d tensors", f.Name, f.Metadata, len(f.Tensors))
	}
	for i := 1; i < len(f.Tensors); i++ {
		if f.Tensors[i-1].Name >= f.Tensors[i].Name {
			t.Errorf("tensors not sorted: %q before %q", f.Tensors[i-1].Name, f.Tensors[i].Name)
		}
	}
	for _, w := range in {
		g, ok := f.Get(w.Name)
		if !ok {
			t.Errorf("%q missing", w.Name)
			continue
		}
		if g.DType != w.DType || !reflect.DeepEqual(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("%q: got %s %v %v, want %s %v %v", w.Name, g.DType, g.Shape, g.Data, w.DType, w.Shape, w.Data)
		}
	}
	floats := map[string][]float32{
		"bf":                                     {1, -2, 3.140625},
		"half":                                   {1, 0.5, 65504},
		"decoder.layers.0.mlp.linear_fc1.weight": {1, 2, 3, -4, 5.5, float32(math.Inf(1))},
	}
	for name, want := range floats {
		g, _ := f.Get(name)
		got, err := g.Float32()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s.Float32() = %v, %v; want %v", name, got, err, want)
		}
	}
	ids, _ := f.Get("ids")
	if _, err := ids.Float32(); err == nil {
		t.Error("I64.Float32() succeeded")
	}
	// A file without metadata has nil Metadata.
	if err := WriteFile(path, in[:1], nil); err != nil {
		t.Fatal(err)
	}
	if f, err := ReadFile(path); err != nil || f.Metadata != nil || len(f.Tensors) != 1 {
		t.Errorf("rewrite without metadata: %v %v", f, err)
	}
}

func TestF32PanicsOnShapeMismatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("F32 with 3 values for shape [2 2] did not panic")
		}
	}()
	F32("w", []int{2, 2}, []float32{1, 2, 3})
}

func TestDTypeElemSize(t *testing.T) {
	want := map[DType]int{DTypeBool: 1, DTypeU8: 1, DTypeI8: 1, DTypeF8E5M2: 1, DTypeF8E4M3: 1,
		DTypeI16: 2, DTypeU16: 2, DTypeF16: 2, DTypeBF16: 2, DTypeI32: 4, DTypeU32: 4, DTypeF32: 4,
		DTypeF64: 8, DTypeI64: 8, DTypeU64: 8, "F4": 0, "f32": 0}
	for d, n := range want {
		if d.ElemSize() != n || d.Valid() != (n != 0) {
			t.Errorf("%s: ElemSize %d Valid %v, want %d", d, d.ElemSize(), d.Valid(), n)
		}
	}
}
