package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// ruleCase is one rule: a change to the default config that breaks it, the
// field sets of the violations expected (the first is the rule's own; the
// others are violations the same change necessarily causes), and substrings
// the first violation's message must contain (field names, numbers, fix).
type ruleCase[C any] struct {
	name   string
	change func(*C)
	want   [][]string
	msg    []string
}

// fieldKey is an order-independent key for a field set.
func fieldKey(fs []string) string {
	s := slices.Clone(fs)
	slices.Sort(s)
	return strings.Join(s, ",")
}

// checkViolations asserts that got holds exactly the violations want (as
// field sets, in any order) and that the violation naming want[0] mentions
// every substring of msg.
func checkViolations(t *testing.T, got []Violation, want [][]string, msg []string) {
	t.Helper()
	var gotKeys, wantKeys []string
	for _, v := range got {
		gotKeys = append(gotKeys, fieldKey(v.Fields))
		if v.Msg == "" || len(v.Fields) == 0 {
			t.Errorf("violation without fields or message: %+v", v)
		}
	}
	for _, w := range want {
		wantKeys = append(wantKeys, fieldKey(w))
	}
	slices.Sort(gotKeys)
	slices.Sort(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Fatalf("violations name %q, want %q\n%s", gotKeys, wantKeys, NewValidationError(got))
	}
	if len(want) == 0 {
		return
	}
	for _, v := range got {
		if fieldKey(v.Fields) != fieldKey(want[0]) {
			continue
		}
		for _, f := range want[0] {
			if !strings.Contains(v.Msg, f) {
				t.Errorf("message does not name field %s: %q", f, v.Msg)
			}
		}
		for _, s := range msg {
			if !strings.Contains(v.Msg, s) {
				t.Errorf("message lacks %q: %q", s, v.Msg)
			}
		}
		return
	}
}

// asValidationError unwraps err, failing the test if it is not a
// *ValidationError.
func asValidationError(t *testing.T, err error) *ValidationError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	return ve
}

func intPtr(n int) *int { return &n }
