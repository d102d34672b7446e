package safetensors

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	f := &File{Name: "init.safetensors", Tensors: []Tensor{
		F32("a", []int{2}, make([]float32, 2)),
		F32("b", []int{2, 3}, make([]float32, 6)),
		F32("extra", []int{1}, make([]float32, 1)),
		F32("x", []int{4}, make([]float32, 4)),
	}}
	if err := f.Check(map[string][]int{"a": {2}, "b": {2, 3}, "extra": {1}, "x": {4}}); err != nil {
		t.Errorf("matching model: %v", err)
	}
	want := map[string][]int{"a": {2}, "b": {3, 2}, "x": {2, 2}, "m1": {1}, "m0": {1}}
	err := f.Check(want)
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *CheckError", err)
	}
	if !reflect.DeepEqual(ce.Missing, []string{"m0", "m1"}) || !reflect.DeepEqual(ce.Unexpected, []string{"extra"}) {
		t.Errorf("missing %v unexpected %v", ce.Missing, ce.Unexpected)
	}
	wantShapes := []ShapeMismatch{{"b", []int{2, 3}, []int{3, 2}}, {"x", []int{4}, []int{2, 2}}}
	if !reflect.DeepEqual(ce.Shapes, wantShapes) {
		t.Errorf("shapes %v", ce.Shapes)
	}
	for _, s := range []string{"init.safetensors does not match the model: 2 missing, 1 unexpected, 2 with the wrong shape",
		"missing: m0, m1", "unexpected: extra", "b is [2 3], the model needs [3 2]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

func TestCheckErrorTruncatesLists(t *testing.T) {
	want := map[string][]int{}
	for _, c := range "abcdefghijkl" {
		want[string(c)] = []int{1}
	}
	err := (&File{Name: "f"}).Check(want)
	if err == nil || !strings.Contains(err.Error(), "missing: a, b, c, d, e, f, g, h and 4 more") {
		t.Errorf("error %v", err)
	}
}
