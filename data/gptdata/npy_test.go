package gptdata

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNpyRoundTrip writes each dtype and reads it back.
func TestNpyRoundTrip(t *testing.T) {
	for _, a := range []*array{
		{descr: "<i2", shape: []int{3}, i16: []int16{-1, 0, 32767}},
		{descr: "<i4", shape: []int{2, 2}, i32: []int32{-5, 1 << 30, 7, 0}},
		{descr: "<u4", shape: []int{0}, u32: []uint32{}},
		{descr: "<u4", shape: []int{2}, u32: []uint32{1<<32 - 1, 3}},
		{descr: "<i8", shape: []int{1}, i64: []int64{-1 << 62}},
	} {
		b := encodeNpy(a)
		if (len(b)-a.size()*npyItemSize[a.descr])%64 != 0 {
			t.Errorf("%s %v: data at %d, not a multiple of 64", a.descr, a.shape, len(b)-a.size()*npyItemSize[a.descr])
		}
		got, err := decodeNpy(b)
		if err != nil {
			t.Fatalf("%s %v: %v", a.descr, a.shape, err)
		}
		if got.descr != a.descr || !slices.Equal(got.shape, a.shape) {
			t.Fatalf("%s %v read as %s %v", a.descr, a.shape, got.descr, got.shape)
		}
		for i := range a.size() {
			if got.at(i) != a.at(i) {
				t.Fatalf("%s %v: element %d = %d, wrote %d", a.descr, a.shape, i, got.at(i), a.at(i))
			}
		}
	}
}

// TestNpyReadsNumpyFiles reads the files numpy.save wrote and writes them
// back byte for byte.
func TestNpyReadsNumpyFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/cache_single/*.npy")
	if err != nil || len(files) != 9 {
		t.Fatalf("%v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		a, err := decodeNpy(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(encodeNpy(a), b) {
			t.Errorf("%s: written back with other bytes", f)
		}
	}
}

func TestNpyErrors(t *testing.T) {
	good := encodeNpy(&array{descr: "<i4", shape: []int{2}, i32: []int32{1, 2}})
	hdr := func(h string) []byte {
		b := []byte("\x93NUMPY\x01\x00")
		b = append(b, byte(len(h)), byte(len(h)>>8))
		return append(b, h...)
	}
	for name, c := range map[string]struct {
		b   []byte
		err string
	}{
		"empty":     {nil, "magic"},
		"truncated": {good[:len(good)-1], "data bytes"},
		"extra":     {append(slices.Clone(good), 0), "data bytes"},
		"version":   {append([]byte("\x93NUMPY\x04\x00"), good[8:]...), "version"},
		"dtype":     {hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }\n"), "dtype"},
		"key":       {hdr("{'descr': '<i4', 'fortran_order': False, 'shape': (0,), 'x': 1}\n"), "key"},
		"missing":   {hdr("{'descr': '<i4', 'shape': (0,), }\n"), "keys"},
		"fortran":   {append(hdr("{'descr': '<i4', 'fortran_order': True, 'shape': (1, 1), }\n"), 0, 0, 0, 0), "Fortran"},
		"shape":     {hdr("{'descr': '<i4', 'fortran_order': False, 'shape': (2), }\n"), "not a tuple"},
		"negative":  {hdr("{'descr': '<i4', 'fortran_order': False, 'shape': (-2,), }\n"), "shape"},
		"huge":      {hdr("{'descr': '<i8', 'fortran_order': False, 'shape': (1125899906842624, 1024), }\n"), "too large"},
		"no dict":   {hdr("[]\n"), "dict"},
		"newline":   {hdr("{'descr': '<i4', 'fortran_order': False, 'shape': (0,), }  "), "newline"},
	} {
		if _, err := decodeNpy(c.b); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one about %s", name, err, c.err)
		}
	}
}

// FuzzDecodeNpy: no panic, and what parses has the data its shape needs and
// writes back to a file that parses the same.
func FuzzDecodeNpy(f *testing.F) {
	f.Add(encodeNpy(&array{descr: "<i4", shape: []int{3}, i32: []int32{1, 2, 3}}))
	f.Add(encodeNpy(&array{descr: "<i8", shape: []int{1, 2}, i64: []int64{1, 2}}))
	f.Add(encodeNpy(&array{descr: "<i2", shape: []int{0}, i16: []int16{}}))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr':'<u4',}"))
	f.Add([]byte("\x93NUMPY\x01\x00\x3a\x00{\"descr\": \"<u4\", \"shape\": (), \"fortran_order\": True}\n\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeNpy(b)
		if err != nil {
			return
		}
		back, err := decodeNpy(encodeNpy(a))
		if err != nil || back.descr != a.descr || !slices.Equal(back.shape, a.shape) {
			t.Fatalf("written back: %v, %v", back, err)
		}
		for i := range a.size() {
			if back.at(i) != a.at(i) {
				t.Fatalf("element %d changed", i)
			}
		}
	})
}
