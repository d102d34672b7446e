package gptdata

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseBlend(t *testing.T) {
	for _, c := range []struct {
		args     []string
		prefixes []string
		weights  []float64
	}{
		{[]string{"/data/a_text_document"}, []string{"/data/a_text_document"}, nil},
		{[]string{"0.3", "a", "0.7", "b"}, []string{"a", "b"}, []float64{0.3, 0.7}},
		{[]string{"30 a 70 b"}, []string{"a", "b"}, []float64{30, 70}},
		{[]string{"a", "b"}, []string{"a", "b"}, nil},
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}, nil},
		{[]string{"1", "a"}, []string{"a"}, []float64{1}},
		{[]string{" a ", "\tb"}, []string{"a", "b"}, nil},
	} {
		b, err := ParseBlend(c.args)
		if err != nil || !slices.Equal(b.Prefixes, c.prefixes) || !slices.Equal(b.Weights, c.weights) {
			t.Errorf("ParseBlend(%q) = %v, %v; want %v %v", c.args, b, err, c.prefixes, c.weights)
		}
	}
	for _, c := range []struct {
		args []string
		bad  string // in the error
	}{
		{nil, "no dataset prefix"},
		{[]string{" "}, "no dataset prefix"},
		{[]string{"0.3", "a", "b"}, `"0.3"`},
		{[]string{"a", "0.5", "b", "0.5"}, `"0.5"`},
		{[]string{"0.3", "a", "0.7", "0.2"}, `"0.2"`},
		{[]string{"0", "a", "1", "b"}, `weight "0"`},
		{[]string{"-1", "a", "1", "b"}, `weight "-1"`},
		{[]string{"inf", "a", "1", "b"}, `weight "inf"`},
		{[]string{"nan", "a", "1", "b"}, `weight "nan"`},
		{[]string{"7"}, `"7"`},
	} {
		_, err := ParseBlend(c.args)
		if err == nil || !strings.Contains(err.Error(), "--data-path") || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("ParseBlend(%q): error %v, want one naming --data-path and %s", c.args, err, c.bad)
		}
	}
}

func TestParseSplit(t *testing.T) {
	for _, c := range []struct {
		s    string
		want [3]float64
	}{
		{"969,30,1", [3]float64{0.969, 0.03, 0.001}},
		{"969, 30, 1", [3]float64{0.969, 0.03, 0.001}},
		{"99,1", [3]float64{0.99, 0.01, 0}},
		{"1", [3]float64{1, 0, 0}},
		{"1,1,1", [3]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{".5,.5,0", [3]float64{0.5, 0.5, 0}},
		{"90,5,5", [3]float64{0.9, 0.05, 0.05}},
	} {
		got, err := ParseSplit(c.s)
		if err != nil || got != c.want {
			t.Errorf("ParseSplit(%q) = %v, %v; want %v", c.s, got, err, c.want)
		}
	}
	for _, s := range []string{"", "a,b", "1,2,3,4", "0,0,0", "-1,2", "1.2.3", "1e3", "inf", "1;2", " , 1"} {
		if _, err := ParseSplit(s); err == nil || !strings.Contains(err.Error(), "--split") {
			t.Errorf("ParseSplit(%q): error %v, want one naming --split", s, err)
		}
	}
}

// TestSplitBookends checks the documents of each split for "969,30,1" of
// 520 and 300 documents (Python: round(0.969·520) = 504, round(0.999·520)
// = 519 (519.48), round(0.999·300) = 300 (299.7)) and rounding half to even.
func TestSplitBookends(t *testing.T) {
	v, err := ParseSplit("969,30,1")
	if err != nil {
		t.Fatal(err)
	}
	m := splitBookends(v)
	want := map[int][3][2]int{520: {{0, 504}, {504, 519}, {519, 520}}, 300: {{0, 291}, {291, 300}, {300, 300}}}
	for n, w := range want {
		for i := range 3 {
			if b, e := m[i].documents(n); [2]int{b, e} != w[i] {
				t.Errorf("%d documents, split %d: [%d, %d), want %v", n, i, b, e, w[i])
			}
		}
	}
	if b, e := (bookend{0.25, 0.75}).documents(10); b != 2 || e != 8 { // 2.5 → 2, 7.5 → 8
		t.Errorf("[0.25, 0.75) of 10: [%d, %d), want [2, 8)", b, e)
	}
	if m := splitBookends([3]float64{1, 0, 0}); m[1] != nil || m[2] != nil {
		t.Errorf("split 1,0,0: %v %v, want no valid or test split", m[1], m[2])
	}
}

func TestNormalizeMatchesNumpy(t *testing.T) {
	var cases []struct{ Weights, Normalized, Twice []float64 }
	readJSON(t, "testdata/normalize.json", &cases)
	if len(cases) < 5 {
		t.Fatal("normalize.json: too few cases")
	}
	for _, c := range cases {
		got := normalize(c.Weights)
		if !slices.Equal(got, c.Normalized) || !slices.Equal(normalize(got), c.Twice) {
			t.Errorf("normalize of %d weights differs from numpy's", len(c.Weights))
		}
	}
}

func TestPyDumps(t *testing.T) {
	tenth := 0.1
	// Python's repr (json.dumps) of each value.
	for f, want := range map[float64]string{
		0.969: "0.969", 1: "1.0", 0: "0.0", math.Copysign(0, -1): "-0.0", 1e-05: "1e-05", 0.0001: "0.0001",
		1e16: "1e+16", 1e15: "1000000000000000.0", 123456789012345678: "1.2345678901234568e+17", 1.5e-7: "1.5e-07",
		tenth + 0.2: "0.30000000000000004", 5e-324: "5e-324", math.MaxFloat64: "1.7976931348623157e+308", 100: "100.0", 2.5e16: "2.5e+16",
	} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %s, Python %s", f, got, want)
		}
	}
	if got, want := pyString("a\"b\\c\n\t\x01\x7f é 😀 /x"), `"a\"b\\c\n\t\u0001\u007f \u00e9 \ud83d\ude00 /x"`; got != want {
		t.Errorf("pyString = %s, Python %s", got, want)
	}
	got := pyDumps(pyDict{{"a", []any{[]any{pyInt0{}, 0.5}, nil}}, {"b", []any{}}, {"c", pyDict{}}, {"d", 3}})
	want := "{\n    \"a\": [\n        [\n            0,\n            0.5\n        ],\n        null\n    ],\n    \"b\": [],\n    \"c\": {},\n    \"d\": 3\n}"
	if got != want {
		t.Errorf("pyDumps =\n%s\nPython\n%s", got, want)
	}
}

// FuzzParseBlend: no panic; a parsed blend has prefixes without spaces and
// one positive finite weight per prefix, or none.
func FuzzParseBlend(f *testing.F) {
	for _, s := range []string{"a", "0.3 a 0.7 b", "a b", "1 a", "0.3 a b", "a 1 b 2", "inf a", "", "  ", "1e309 a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBlend(strings.Split(s, "|"))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--data-path") {
				t.Fatalf("error %q does not name --data-path", err)
			}
			return
		}
		if len(b.Prefixes) == 0 || (b.Weights != nil && len(b.Weights) != len(b.Prefixes)) {
			t.Fatalf("%q: %d prefixes, %d weights", s, len(b.Prefixes), len(b.Weights))
		}
		for _, w := range b.Weights {
			if !(w > 0) || math.IsInf(w, 0) {
				t.Fatalf("%q: weight %v", s, w)
			}
		}
		for _, p := range b.Prefixes {
			if p == "" || strings.ContainsAny(p, " \t\n") {
				t.Fatalf("%q: prefix %q", s, p)
			}
		}
	})
}

// FuzzParseSplit: no panic; a parsed split is non-negative and sums to 1.
func FuzzParseSplit(f *testing.F) {
	for _, s := range []string{"969,30,1", "969, 30, 1", "1", "0,0,0", "1,,1", ".", "1.5,2.5", "99999999999999999999999999999,1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSplit(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--split") {
				t.Fatalf("error %q does not name --split", err)
			}
			return
		}
		if v[0] < 0 || v[1] < 0 || v[2] < 0 || math.Abs(v[0]+v[1]+v[2]-1) > 1e-12 {
			t.Fatalf("%q: %v", s, v)
		}
		m := splitBookends(v)
		for n := range 50 {
			prev := 0
			for i := range 3 {
				if m[i] == nil {
					continue
				}
				b, e := m[i].documents(n)
				if b < prev || e < b || e > n {
					t.Fatalf("%q, %d documents: split %d [%d, %d)", s, n, i, b, e)
				}
				prev = e
			}
		}
	})
}
