package indexed

import "testing"

// The codes, names and sizes of Megatron's DType enum (indexed_dataset.py) and NumPy's
// item sizes, written out here independently of dtypes.
func TestDTypeCodes(t *testing.T) {
	want := []struct {
		dt   DType
		code uint8
		name string
		size int
	}{
		{Uint8, 1, "uint8", 1}, {Int8, 2, "int8", 1}, {Int16, 3, "int16", 2}, {Int32, 4, "int32", 4},
		{Int64, 5, "int64", 8}, {Float64, 6, "float64", 8}, {Float32, 7, "float32", 4}, {Uint16, 8, "uint16", 2},
	}
	for _, w := range want {
		if uint8(w.dt) != w.code || w.dt.String() != w.name || w.dt.Size() != w.size || !w.dt.Valid() {
			t.Errorf("%d: code %d name %q size %d valid %v, want %d %q %d", w.code, uint8(w.dt), w.dt, w.dt.Size(), w.dt.Valid(), w.code, w.name, w.size)
		}
	}
	for bad, name := range map[DType]string{0: "DType(0)", 9: "DType(9)", 255: "DType(255)"} {
		if bad.Valid() || bad.Size() != 0 || bad.String() != name {
			t.Errorf("code %d: valid %v size %d name %q, want false 0 %q", uint8(bad), bad.Valid(), bad.Size(), bad, name)
		}
	}
}

func TestTokenRange(t *testing.T) {
	want := map[DType][2]int32{
		Uint8: {0, 255}, Int8: {-128, 127}, Int16: {-32768, 32767}, Uint16: {0, 65535},
		Int32: {-1 << 31, 1<<31 - 1}, Int64: {-1 << 31, 1<<31 - 1}, Float64: {-1 << 31, 1<<31 - 1},
		Float32: {-1 << 24, 1 << 24},
	}
	for dt, w := range want {
		if lo, hi := dt.TokenRange(); lo != w[0] || hi != w[1] {
			t.Errorf("%v: [%d, %d], want %v", dt, lo, hi, w)
		}
	}
}

// Megatron's optimal_dtype: uint16 when the cardinality is < 65500, else int32.
func TestOptimalDType(t *testing.T) {
	for _, c := range []struct {
		vocab int
		want  DType
	}{{1, Uint16}, {256, Uint16}, {50257, Uint16}, {65499, Uint16}, {65500, Int32}, {65536, Int32}, {128256, Int32}} {
		if got := OptimalDType(c.vocab); got != c.want {
			t.Errorf("OptimalDType(%d) = %v, want %v", c.vocab, got, c.want)
		}
	}
}
