package config

import (
	"fmt"
	"strings"
)

// Violation is one broken configuration rule.
//
// Fields holds the names of the settings involved, spelled as Megatron-Core
// spells them (snake_case, e.g. "tensor_model_parallel_size"); these are also
// the JSON keys of the config structs and, with dashes, the CLI flags. The Go
// field is the CamelCase form of the same name.
//
// Msg is a complete sentence that names the fields, shows the arithmetic with
// the actual numbers, and says how to fix it.
type Violation struct {
	Fields []string
	Msg    string
}

// String returns v.Msg.
func (v Violation) String() string { return v.Msg }

// Names reports whether every field in names is one of v.Fields.
func (v Violation) Names(names ...string) bool {
	for _, n := range names {
		found := false
		for _, f := range v.Fields {
			if f == n {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// ValidationError carries every violated rule of a configuration, so that a
// user sees all the problems at once rather than one per run.
type ValidationError struct {
	Violations []Violation
}

// Error lists the violations one per line, after a header line that counts
// them.
func (e *ValidationError) Error() string {
	var b strings.Builder
	n := len(e.Violations)
	if n == 1 {
		b.WriteString("config: 1 invalid setting:")
	} else {
		fmt.Fprintf(&b, "config: %d invalid settings:", n)
	}
	for _, v := range e.Violations {
		b.WriteString("\n  - ")
		b.WriteString(v.Msg)
	}
	return b.String()
}

// Fields returns the union of the fields named by all violations, in first
// appearance order.
func (e *ValidationError) Fields() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range e.Violations {
		for _, f := range v.Fields {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// NewValidationError returns nil when vs is empty, and otherwise a
// *ValidationError holding vs. It lets other config structs (such as the
// transformer config, which embeds a ModelParallelConfig) merge their
// violations with the ones of this package:
//
//	vs := append(c.ModelParallelConfig.Violations(), c.ownViolations()...)
//	return config.NewValidationError(vs)
func NewValidationError(vs []Violation) error {
	if len(vs) == 0 {
		return nil
	}
	return &ValidationError{Violations: vs}
}

// violationList accumulates Violations; the zero value is ready to use.
type violationList []Violation

// add appends a violation naming fields, with a message built by fmt.Sprintf.
func (vs *violationList) add(fields []string, format string, args ...any) {
	*vs = append(*vs, Violation{Fields: fields, Msg: fmt.Sprintf(format, args...)})
}

// fieldList is shorthand for a []string literal of field names.
func fieldList(names ...string) []string { return names }
