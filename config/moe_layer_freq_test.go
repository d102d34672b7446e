package config

import (
	"slices"
	"strings"
	"testing"
)

// TestParseMoELayerFreq: an integer is a frequency; a list expression is
// evaluated as the reference's Python eval would (lists, integers, '+',
// '*', parentheses, with '*' binding tighter than '+').
func TestParseMoELayerFreq(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []int
		pattern bool
	}{
		{"1", []int{1}, false},
		{"2", []int{2}, false},
		{" 3 ", []int{3}, false},
		{"0", []int{0}, false},   // refused by Validate
		{"-2", []int{-2}, false}, // refused by Validate
		{"[1,0,1]", []int{1, 0, 1}, true},
		{"[1, 0, 1, 0]", []int{1, 0, 1, 0}, true},
		{"[1,0,]", []int{1, 0}, true},
		{"[1]", []int{1}, true},
		{"([1]*3+[0]*1)*2", []int{1, 1, 1, 0, 1, 1, 1, 0}, true},
		{"([1]*3+[0]*1)*3", []int{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}, true},
		{"([1]*3+[0]*2)*2", []int{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, true},
		{"([0]+[1]*3)", []int{0, 1, 1, 1}, true},
		{"[0]+[1]*3", []int{0, 1, 1, 1}, true},
		{"2*[1,0]", []int{1, 0, 1, 0}, true},
		{"[1,0]*(1+1)", []int{1, 0, 1, 0}, true},
		{"[1,0]*2*2", []int{1, 0, 1, 0, 1, 0, 1, 0}, true},
		{"[1]*0+[0]", []int{0}, true},
		{"[1+0,0*5]", []int{1, 0}, true},
		{"(([1]))*2", []int{1, 1}, true},
		{"[2,3]", []int{2, 3}, true}, // values are Validate's
	} {
		got, pattern, err := ParseMoELayerFreq(c.in)
		if err != nil || !slices.Equal(got, c.want) || pattern != c.pattern {
			t.Errorf("%q: %v (pattern %v, %v), want %v (pattern %v)", c.in, got, pattern, err, c.want, c.pattern)
		}
	}
}

// TestParseMoELayerFreqErrors: what is not an integer or a non-empty list
// of integers is an error saying where and why.
func TestParseMoELayerFreqErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "neither an integer"},
		{"x", "neither an integer"},
		{"1.5", "neither an integer"},
		{"[1,0", "'[' is not closed"},
		{"([1]*2", "'(' is not closed"},
		{"[1 0]", "unexpected '0' where ',' or ']' should follow"},
		{"[]", "an empty list"},
		{"[1]*0", "an empty list"},
		{"[1]+1", "'+' joins a list and an integer"},
		{"[1]*[2]", "'*' between two lists"},
		{"[[1],[0]]", "a list inside a list"},
		{"[1]**2", "'**'"},
		{"[1]*(1,0)", "a tuple"},
		{"[1][0]", "unexpected '['"},
		{"[x]", "unexpected 'x'"},
		{"[1]*", "it ends"},
		{"[-1]", "unexpected '-'"},
		{"[1]*99999999999", "beyond"},
		{"[1]*70000", "beyond 65536 layers"},
		{"([1]*256)*256+[0]", "beyond 65536 layers"},
		{"[1]*(2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2)", "beyond any layer count"},
		{strings.Repeat("(", 100) + "[1]" + strings.Repeat(")", 100), "nested deeper"},
	} {
		got, _, err := ParseMoELayerFreq(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v (%v), want an error containing %q", c.in, got, err, c.want)
		}
	}
}

// TestFormatMoELayerFreq: the text a checkpoint records parses back to
// the same setting; no setting is the default frequency 1.
func TestFormatMoELayerFreq(t *testing.T) {
	for _, c := range []struct {
		f    []int
		want string
	}{{nil, "1"}, {[]int{1}, "1"}, {[]int{2}, "2"}, {[]int{1, 0, 1, 0}, "[1,0,1,0]"}} {
		s := FormatMoELayerFreq(c.f)
		if s != c.want {
			t.Errorf("%v: %q, want %q", c.f, s, c.want)
		}
		back, _, err := ParseMoELayerFreq(s)
		if want := c.f; err != nil || !slices.Equal(back, want) && !(want == nil && slices.Equal(back, []int{1})) {
			t.Errorf("%q parses back to %v (%v), want %v", s, back, err, c.f)
		}
	}
}

// FuzzParseMoELayerFreq checks that parsing never panics nor builds a
// list beyond MaxMoELayerPattern, that an integer (no '[') is a
// frequency and a pattern a non-empty list, and that a result's text
// (FormatMoELayerFreq, what a checkpoint records) parses back to it.
func FuzzParseMoELayerFreq(f *testing.F) {
	for _, s := range []string{
		"1", "2", "-3", " 4", "x", "", "[1,0,1]", "[1, 0, 1, 0]", "[1]", "[0]", "[]", "[1,]",
		"([1]*3+[0]*1)*2", "([1]*3+[0]*2)*2", "([0]+[1]*23)", "[0]+[1]*3", "2*[1,0]", "[1,0]*(1+1)",
		"[1]*0", "[1]+1", "[1]*[2]", "[[1]]", "[1]**2", "(1,0)", "[1][0]", "[1]*99999999999",
		"(((((([1])))))))", "[1]*65536", "[1]*65537", "([1]*256)*256", "[1+1*2,0]", "[1,0", "((",
		"[1]*(2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2*2)", "[é]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, pattern, err := ParseMoELayerFreq(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: an empty error", s)
			}
			return
		}
		if pattern != strings.Contains(s, "[") {
			t.Fatalf("%q: pattern %v", s, pattern)
		}
		if len(got) == 0 || len(got) > MaxMoELayerPattern || !pattern && len(got) != 1 {
			t.Fatalf("%q: %d values (pattern %v)", s, len(got), pattern)
		}
		text := FormatMoELayerFreq(got)
		if len(got) == 1 && pattern {
			text = "[" + text + "]"
		}
		back, backPattern, err := ParseMoELayerFreq(text)
		if err != nil || !slices.Equal(back, got) || backPattern != pattern {
			t.Fatalf("%q gives %v, whose text %q parses to %v (pattern %v, %v)", s, got, text, back, backPattern, err)
		}
	})
}
