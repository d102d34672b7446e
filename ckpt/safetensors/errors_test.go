package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestReadErrors(t *testing.T) {
	f32 := func(begin, end int) string {
		return `"w":{"dtype":"F32","shape":[2],"data_offsets":[` + strconv.Itoa(begin) + `,` + strconv.Itoa(end) + `]}`
	}
	hugeLen := make([]byte, 16)
	binary.LittleEndian.PutUint64(hugeLen, 1<<40)
	overCap := make([]byte, 16)
	binary.LittleEndian.PutUint64(overCap, maxHeaderLen+1)
	maxLen := make([]byte, 16)
	binary.LittleEndian.PutUint64(maxLen, 1<<64-1)
	cases := []struct {
		name string
		raw  []byte
		want []string // substrings of the error
	}{
		{"empty file", nil, []string{"bad.safetensors: file has 0 bytes, fewer than the 8", "re-create"}},
		{"7 bytes", []byte{1, 2, 3, 4, 5, 6, 7}, []string{"file has 7 bytes"}},
		{"header length too large", hugeLen, []string{"header length 1099511627776 exceeds the format's limit of 100000000 bytes"}},
		{"header length beyond the file", handFile("{}", nil, false)[:9], []string{"header length 2 is larger than the 1 bytes that follow it (file size 9)"}},
		{"header not JSON", handFile(`{"w":`, nil, false), []string{"malformed JSON header (5 bytes)"}},
		{"header not an object", handFile(`[1,2]`, nil, false), []string{"malformed JSON header", "not an object"}},
		{"trailing garbage", handFile(`{} x`, nil, false), []string{"malformed JSON header", "after the closing brace"}},
		{"duplicate name", handFile(`{`+f32(0, 8)+`,`+f32(8, 16)+`}`, make([]byte, 16), false), []string{`"w" appears twice`}},
		{"missing fields", handFile(`{"w":{"dtype":"F32"}}`, nil, false), []string{`tensor "w" has no [shape data_offsets]`}},
		{"entry not an object", handFile(`{"w":3}`, nil, false), []string{`tensor "w"`, "malformed JSON header"}},
		{"bad metadata", handFile(`{"__metadata__":{"a":1}}`, nil, false), []string{"__metadata__ must be an object of strings"}},
		{"unknown dtype", handFile(`{"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8), false), []string{`tensor "w" has dtype "F12"`, "known: BOOL"}},
		{"negative dim", handFile(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8), false), []string{`tensor "w" of dtype F32 has shape [-2]: dimension -2 (index 0) is negative`}},
		{"three offsets", handFile(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, make([]byte, 8), false), []string{"has 3 data_offsets [0 4 8], want 2"}},
		{"offsets reversed", handFile(`{`+f32(8, 0)+`}`, make([]byte, 8), false), []string{"data_offsets [8, 0] out of range"}},
		{"negative offset", handFile(`{`+f32(-8, 0)+`}`, make([]byte, 8), false), []string{"data_offsets [-8, 0] out of range"}},
		{"fractional offset", handFile(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.5]}}`, make([]byte, 8), false), []string{`tensor "w"`, "malformed"}},
		{"size mismatch", handFile(`{`+f32(0, 12)+`}`, make([]byte, 12), false), []string{`tensor "w" of dtype F32 and shape [2] needs 2·4 = 8 bytes but its data_offsets [0, 12] span 12`}},
		{"overlap", handFile(`{`+f32(0, 8)+`,"v":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}}`, make([]byte, 10), false), []string{"tensors w at bytes [0,8) and v at bytes [6,10) overlap"}},
		{"truncated body", handFile(`{`+f32(0, 8)+`}`, make([]byte, 5), false), []string{"tensor w needs bytes [0,8) but the data section has only 5 bytes: the file is truncated; re-create it"}},
		{"invalid utf8", handFile("{\"\xff\":1}", nil, false), []string{"not valid UTF-8"}},
		{"header length one over the limit", overCap, []string{"header length 100000001 exceeds the format's limit of 100000000 bytes"}},
		{"header length of 2^64-1", maxLen, []string{"header length 18446744073709551615 exceeds"}},
		{"empty header", handFile("", nil, false), []string{"malformed JSON header (0 bytes)"}},
		{"duplicate escaped name", handFile(`{`+f32(0, 8)+`,"\u0077":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, make([]byte, 16), false), []string{`"w" appears twice`}},
		{"duplicate metadata", handFile(`{"__metadata__":{},"__metadata__":{}}`, nil, false), []string{`"__metadata__" appears twice`}},
		{"identical ranges", handFile(`{`+f32(0, 8)+`,"v":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, make([]byte, 8), false), []string{"tensors v at bytes [0,8) and w at bytes [0,8) overlap"}},
		{"overlap not adjacent by name", handFile(`{"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},"b":{"dtype":"U8","shape":[2],"data_offsets":[20,22]},"c":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}`, make([]byte, 24), false), []string{"tensors a at bytes [0,16) and c at bytes [8,12) overlap"}},
		{"empty tensor past the end", handFile(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[9,9]}}`, make([]byte, 8), false), []string{"tensor w needs bytes [9,9) but the data section has only 8 bytes"}},
		{"offsets near the int64 limit", handFile(`{"w":{"dtype":"U8","shape":[7],"data_offsets":[9223372036854775800,9223372036854775807]}}`, make([]byte, 8), false), []string{"tensor w needs bytes [9223372036854775800,9223372036854775807) but the data section has only 8 bytes"}},
		{"offset beyond int64", handFile(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,9223372036854775808]}}`, nil, false), []string{`tensor "w"`, "malformed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.raw), int64(len(c.raw)), "bad.safetensors")
			if err == nil {
				t.Fatal("Read succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "bad.safetensors: ") {
				t.Errorf("error %q does not start with the file name", err)
			}
		})
	}
}

func TestReadAcceptsHolesAndZeroSize(t *testing.T) {
	// A hole [8,12), a zero-size tensor inside another's range and trailing bytes are fine.
	raw := handFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[12,14]}}`,
		[]byte{0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 5, 6, 7}, false)
	f, err := Read(bytes.NewReader(raw), int64(len(raw)), "holes")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := f.Get("b"); !bytes.Equal(b.Data, []byte{5, 6}) {
		t.Errorf("b = %v", b.Data)
	}
}

func TestReadOffsetsOutOfNameOrder(t *testing.T) {
	// Tensors need not be stored in name order; each gets its own bytes.
	raw := handFile(`{"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, []byte{1, 2, 3, 4}, false)
	f, err := Read(bytes.NewReader(raw), int64(len(raw)), "order")
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := f.Get("a"); !bytes.Equal(a.Data, []byte{3, 4}) {
		t.Errorf("a = %v", a.Data)
	}
	if b, _ := f.Get("b"); !bytes.Equal(b.Data, []byte{1, 2}) {
		t.Errorf("b = %v", b.Data)
	}
}

func TestReadShortReader(t *testing.T) {
	raw := handFile(goldenHeader, goldenData, true)
	// The claimed size is right but the reader stops early.
	_, err := Read(bytes.NewReader(raw[:len(raw)-3]), int64(len(raw)), "short")
	if err == nil || !strings.Contains(err.Error(), "the data section should have 9 bytes") {
		t.Errorf("error %v", err)
	}
	// Trailing bytes after the last tensor are not kept but must be there.
	raw = handFile(goldenHeader, append(slices.Clone(goldenData), 1, 2, 3, 4, 5), true)
	_, err = Read(bytes.NewReader(raw[:len(raw)-2]), int64(len(raw)), "short")
	if err == nil || !strings.Contains(err.Error(), "the data section should have 14 bytes") || !strings.Contains(err.Error(), "only 12 could be read") {
		t.Errorf("short trailing bytes: error %v", err)
	}
	f, err := Read(bytes.NewReader(raw), int64(len(raw)), "trailing")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := f.Get("b"); !bytes.Equal(b.Data, []byte{7}) || cap(b.Data) != 1 {
		t.Errorf("b = %v (cap %d)", b.Data, cap(b.Data))
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "none.safetensors")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	p := filepath.Join(dir, "trunc.safetensors")
	raw := handFile(goldenHeader, goldenData, true)
	if err := os.WriteFile(p, raw[:len(raw)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(p)
	if want := p + ": tensor b needs bytes [8,9) but the data section has only 8 bytes"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("truncated: %v, want %q", err, want)
	}
}

func TestWriteRejectsInvalidTensors(t *testing.T) {
	good := F32("w", []int{1}, []float32{1})
	cases := []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"duplicate", []Tensor{good, good}, `"w" is used twice`},
		{"reserved", []Tensor{{Name: "__metadata__", DType: DTypeU8, Shape: []int{1}, Data: []byte{1}}}, "reserved"},
		{"empty name", []Tensor{{Name: "", DType: DTypeU8, Shape: []int{1}, Data: []byte{1}}}, "empty or not valid UTF-8"},
		{"dtype", []Tensor{{Name: "x", DType: "F12", Shape: []int{1}, Data: []byte{1}}}, `dtype "F12"`},
		{"data length", []Tensor{{Name: "x", DType: DTypeF32, Shape: []int{2}, Data: []byte{1}}}, "needs 2·4 bytes but Data has 1"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		err := Write(&buf, c.tensors, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", c.name, buf.Len())
		}
	}
}
