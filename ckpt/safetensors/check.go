package safetensors

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ShapeMismatch is a tensor present in both a file and a model with different shapes.
type ShapeMismatch struct {
	Name      string
	Got, Want []int
}

// CheckError lists every difference between a file's tensors and the tensors a model
// expects (see [File.Check]). Each list is sorted by name.
type CheckError struct {
	File       string
	Missing    []string        // expected by the model, absent from the file
	Unexpected []string        // in the file, not expected by the model
	Shapes     []ShapeMismatch // in both, with different shapes
}

// maxListed bounds how many names of each kind Error prints.
const maxListed = 8

// Error reports the counts and, for each kind, the first few names.
func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s does not match the model: %d missing, %d unexpected, %d with the wrong shape", e.File, len(e.Missing), len(e.Unexpected), len(e.Shapes))
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "; missing: %s", listNames(e.Missing))
	}
	if len(e.Unexpected) > 0 {
		fmt.Fprintf(&b, "; unexpected: %s", listNames(e.Unexpected))
	}
	if len(e.Shapes) > 0 {
		parts := make([]string, 0, min(len(e.Shapes), maxListed))
		for _, m := range e.Shapes[:min(len(e.Shapes), maxListed)] {
			parts = append(parts, fmt.Sprintf("%s is %v, the model needs %v", m.Name, m.Got, m.Want))
		}
		if more := len(e.Shapes) - maxListed; more > 0 {
			parts = append(parts, fmt.Sprintf("and %d more", more))
		}
		fmt.Fprintf(&b, "; wrong shape: %s", strings.Join(parts, ", "))
	}
	b.WriteString(": use a file saved from a model with the same configuration (layers, hidden size, ffn size, vocab, max positions) and Megatron parameter names")
	return b.String()
}

// listNames joins up to maxListed names and says how many more there are.
func listNames(names []string) string {
	s := strings.Join(names[:min(len(names), maxListed)], ", ")
	if more := len(names) - maxListed; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// Check compares the file's tensors with want, the shape of every tensor a model expects
// by name. It returns nil if the names and shapes match exactly, and otherwise a
// *[CheckError] listing all missing names, all unexpected names and all shape mismatches.
// Dtypes are not compared.
func (f *File) Check(want map[string][]int) error {
	e := &CheckError{File: f.Name}
	have := make(map[string]bool, len(f.Tensors))
	for _, t := range f.Tensors {
		have[t.Name] = true
		w, ok := want[t.Name]
		switch {
		case !ok:
			e.Unexpected = append(e.Unexpected, t.Name)
		case !slices.Equal(t.Shape, w):
			e.Shapes = append(e.Shapes, ShapeMismatch{Name: t.Name, Got: t.Shape, Want: w})
		}
	}
	for name := range want {
		if !have[name] {
			e.Missing = append(e.Missing, name)
		}
	}
	sort.Strings(e.Missing)
	sort.Strings(e.Unexpected)
	sort.Slice(e.Shapes, func(i, j int) bool { return e.Shapes[i].Name < e.Shapes[j].Name })
	if len(e.Missing)+len(e.Unexpected)+len(e.Shapes) == 0 {
		return nil
	}
	return e
}
