package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzName is the name given to Read by FuzzRead; every error must start with it.
const fuzzName = "fuzz.safetensors"

// writeSeed returns the bytes Write produces for tensors and metadata.
func writeSeed(f *testing.F, tensors []Tensor, metadata map[string]string) []byte {
	f.Helper()
	var b bytes.Buffer
	if err := Write(&b, tensors, metadata); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// readSeeds returns the seed files of FuzzRead: files written by Write, their truncated
// and garbled variants, and hand-written headers that Read must reject or accept.
func readSeeds(f *testing.F) [][]byte {
	f.Helper()
	valid := [][]byte{
		writeSeed(f, nil, nil),
		writeSeed(f, []Tensor{}, map[string]string{"format": "gotron"}),
		writeSeed(f, []Tensor{F32("s", []int{}, []float32{3.5})}, nil),
		writeSeed(f, []Tensor{F32("v", []int{3}, []float32{1, -2, 0.25})}, map[string]string{"format": "gotron"}),
		writeSeed(f, []Tensor{
			F32("m", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
			F32("e", []int{0}, nil),
			F32("z", []int{2, 0, 3}, nil),
			F32("b", []int{1, 1, 2}, []float32{-1, 7}),
		}, map[string]string{"format": "pt", "note": "ü ✓"}),
		writeSeed(f, []Tensor{
			{Name: "h", DType: DTypeBF16, Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x00, 0xc0}},
			{Name: "f16", DType: DTypeF16, Shape: []int{1}, Data: []byte{0x00, 0x3c}},
			{Name: "i", DType: DTypeI64, Shape: []int{1}, Data: make([]byte, 8)},
			{Name: "u", DType: DTypeU8, Shape: []int{3}, Data: []byte{1, 2, 3}},
		}, nil),
	}
	seeds := slices.Clone(valid)
	for _, v := range valid {
		// Truncated: no header length, inside the header, inside the data, one byte short.
		for _, n := range []int{0, 7, 8, 8 + (len(v)-8)/2, len(v) - 1} {
			if n >= 0 && n < len(v) {
				seeds = append(seeds, slices.Clone(v[:n]))
			}
		}
		// Garbled: a flipped byte in the header, one in the data, a trailing byte.
		g := slices.Clone(v)
		g[8+(len(g)-8)/3] ^= 0x5a
		seeds = append(seeds, g)
		g = slices.Clone(v)
		g[len(g)-1] ^= 0xff
		seeds = append(seeds, g)
		seeds = append(seeds, append(slices.Clone(v), 0))
		// Header lengths larger than the data that follows, and beyond the format's limit.
		for _, n := range []uint64{uint64(len(v) - 8 + 1), 1 << 40, maxHeaderLen + 1, 1<<64 - 1} {
			g = slices.Clone(v)
			binary.LittleEndian.PutUint64(g, n)
			seeds = append(seeds, g)
		}
	}
	for _, h := range []struct {
		header string
		data   int
	}{
		{`{}`, 0},
		{`{"__metadata__":null}`, 0},
		{`{"__metadata__":{}}`, 0},
		{`{"__metadata__":{"a":1}}`, 0},
		{`[1,2]`, 0},
		{`{} x`, 0},
		{`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16},
		{`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"\u0077":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16},
		{`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}}`, 10},
		{`{"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 16},
		{`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8},
		{`{"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}`, 8},
		{`{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`, 8},
		{`{"w":{"dtype":"F32","shape":[2]}}`, 8},
		{`{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1},
		{`{"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}}`, 8},
		{"{\"\xff\":1}", 0},
		// Element counts at the edge of what the reader accepts: the byte length
		// product(shape)·elemsize must not overflow.
		{`{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0},
		{`{"w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}}`, 0},
		{`{"w":{"dtype":"BF16","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0},
		{`{"w":{"dtype":"U8","shape":[0,9223372036854775807],"data_offsets":[0,0]}}`, 0},
		{`{"w":{"dtype":"F64","shape":[1152921504606846975,0],"data_offsets":[0,0]}}`, 0},
		// Layouts: offsets near the int64 limit, an empty tensor past the end, a tensor
		// inside another that is not its neighbour by offset, identical ranges.
		{`{"w":{"dtype":"U8","shape":[7],"data_offsets":[9223372036854775800,9223372036854775807]}}`, 8},
		{`{"w":{"dtype":"U8","shape":[0],"data_offsets":[9,9]}}`, 8},
		{`{"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},"b":{"dtype":"U8","shape":[2],"data_offsets":[20,22]},"c":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}`, 24},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 8},
		{`{"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 4},
		{`{"__metadata__":{},"__metadata__":{}}`, 0},
	} {
		seeds = append(seeds, handFile(h.header, make([]byte, h.data), true))
	}
	for _, h := range badShapes {
		seeds = append(seeds, handFile(h.header, make([]byte, h.data), true))
	}
	return seeds
}

// FuzzRead checks that Read never panics on any input and that whatever it accepts is
// consistent: errors start with the file name; the tensors are sorted by unique name and
// each holds product(shape)·elemsize bytes; Float32 of a float tensor errors or returns
// NumElements values; a reader shorter than the size given is an error; and writing the
// tensors back with Write and reading them again gives the same names, dtypes, shapes,
// bytes and metadata.
func FuzzRead(f *testing.F) {
	for _, s := range readSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		file, err := Read(bytes.NewReader(raw), int64(len(raw)), fuzzName)
		if _, err2 := Read(bytes.NewReader(raw), int64(len(raw))+1, fuzzName); err2 == nil {
			t.Errorf("Read with a size one byte larger than the reader succeeded")
		} else if !strings.HasPrefix(err2.Error(), fuzzName+": ") {
			t.Errorf("error %q does not start with the file name", err2)
		}
		if err != nil {
			if file != nil {
				t.Errorf("Read returned a file together with the error %v", err)
			}
			if !strings.HasPrefix(err.Error(), fuzzName+": ") {
				t.Errorf("error %q does not start with the file name", err)
			}
			return
		}
		checkFile(t, file)

		var buf bytes.Buffer
		if err := Write(&buf, file.Tensors, file.Metadata); err != nil {
			// Read accepts an empty tensor name, which Write refuses; nothing else that
			// Read accepts may be refused.
			if slices.ContainsFunc(file.Tensors, func(t Tensor) bool { return t.Name == "" }) {
				return
			}
			t.Fatalf("Write of the tensors Read accepted: %v", err)
		}
		again, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), fuzzName)
		if err != nil {
			t.Fatalf("Read of the bytes Write produced: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("round trip: %d tensors, want %d", len(again.Tensors), len(file.Tensors))
		}
		for i, a := range again.Tensors {
			w := file.Tensors[i]
			if a.Name != w.Name || a.DType != w.DType || !slices.Equal(a.Shape, w.Shape) || !bytes.Equal(a.Data, w.Data) {
				t.Errorf("round trip: tensor %d is %q %s %v (%d bytes), want %q %s %v (%d bytes)",
					i, a.Name, a.DType, a.Shape, len(a.Data), w.Name, w.DType, w.Shape, len(w.Data))
			}
		}
		if !maps.Equal(again.Metadata, file.Metadata) {
			t.Errorf("round trip: metadata %v, want %v", again.Metadata, file.Metadata)
		}
	})
}

// checkFile checks the invariants of a file Read accepted.
func checkFile(t *testing.T, file *File) {
	t.Helper()
	if file.Name != fuzzName {
		t.Errorf("File.Name %q, want %q", file.Name, fuzzName)
	}
	for i, tn := range file.Tensors {
		if i > 0 && file.Tensors[i-1].Name >= tn.Name {
			t.Errorf("tensors %q and %q are not sorted by unique name", file.Tensors[i-1].Name, tn.Name)
		}
		if got, ok := file.Get(tn.Name); !ok || got.Name != tn.Name {
			t.Errorf("Get(%q) does not find the tensor", tn.Name)
		}
		size := tn.DType.ElemSize()
		if size == 0 {
			t.Errorf("tensor %q has unknown dtype %q", tn.Name, tn.DType)
			continue
		}
		// The element count and byte length in arbitrary precision, so that an overflow
		// in the reader's arithmetic cannot hide a mismatch.
		numel := big.NewInt(1)
		for _, d := range tn.Shape {
			if d < 0 {
				t.Errorf("tensor %q has negative dimension in shape %v", tn.Name, tn.Shape)
			}
			numel.Mul(numel, big.NewInt(int64(d)))
		}
		want := new(big.Int).Mul(numel, big.NewInt(int64(size)))
		// The non-zero dimensions' product and byte length fit in an int (see shapeSize).
		nonZero := big.NewInt(1)
		for _, d := range tn.Shape {
			if d != 0 {
				nonZero.Mul(nonZero, big.NewInt(int64(d)))
			}
		}
		if nonZero.Mul(nonZero, big.NewInt(int64(size))).Cmp(big.NewInt(math.MaxInt)) > 0 {
			t.Errorf("tensor %q of dtype %s has shape %v whose non-zero dimensions span %v bytes, more than an int",
				tn.Name, tn.DType, tn.Shape, nonZero)
		}
		if want.Cmp(big.NewInt(int64(len(tn.Data)))) != 0 {
			t.Fatalf("tensor %q of dtype %s and shape %v holds %d bytes, want %v·%d = %v",
				tn.Name, tn.DType, tn.Shape, len(tn.Data), numel, size, want)
		}
		if n := tn.NumElements(); big.NewInt(int64(n)).Cmp(numel) != 0 {
			t.Errorf("tensor %q: NumElements() = %d, want %v", tn.Name, n, numel)
		}
		switch tn.DType {
		case DTypeF32, DTypeBF16, DTypeF16:
			vals, err := tn.Float32()
			if err == nil && len(vals) != tn.NumElements() {
				t.Errorf("tensor %q: Float32 returned %d values, want %d", tn.Name, len(vals), tn.NumElements())
			}
			if err != nil { // the length was checked above, so this is a bug
				t.Errorf("tensor %q: Float32 of a valid %s tensor: %v", tn.Name, tn.DType, err)
			}
		}
	}
}

// TestElementCountOverflow covers shapes whose element count fits in int64 but whose byte
// length product(shape)·elemsize does not: Read and Write refuse them and Float32 errors
// rather than allocating. (Element counts up to 2^62 were once accepted, so that an F32
// tensor of 2^62 elements passed with 0 bytes of data and Float32 panicked.)
func TestElementCountOverflow(t *testing.T) {
	for _, c := range []struct {
		dtype DType
		shape []int
		data  int
	}{
		{DTypeF32, []int{1 << 62}, 0},
		{DTypeF32, []int{1 << 31, 1 << 31}, 0},
		{DTypeF64, []int{1<<61 + 1}, 8},
		{DTypeBF16, []int{1 << 62}, 0},
		{DTypeU8, []int{1 << 60}, 0},
	} {
		header := `{"w":{"dtype":"` + string(c.dtype) + `","shape":` + strings.ReplaceAll(fmt.Sprint(c.shape), " ", ",") +
			`,"data_offsets":[0,` + strconv.Itoa(c.data) + `]}}`
		raw := handFile(header, make([]byte, c.data), true)
		if _, err := Read(bytes.NewReader(raw), int64(len(raw)), "big.safetensors"); err == nil {
			t.Errorf("Read accepted %s", header)
		}
		tn := Tensor{Name: "w", DType: c.dtype, Shape: c.shape, Data: make([]byte, c.data)}
		if err := Write(io.Discard, []Tensor{tn}, nil); err == nil {
			t.Errorf("Write accepted %s %v with %d bytes", c.dtype, c.shape, c.data)
		}
		if _, err := tn.Float32(); err == nil {
			t.Errorf("Float32 of %s %v with %d bytes succeeded", c.dtype, c.shape, c.data)
		}
	}
}
