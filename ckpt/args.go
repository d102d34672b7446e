package ckpt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
)

// ModelArgsKey is the key of the model options within a checkpoint's
// arguments (Args.Model), in the manifest and in the whole-tensor
// form's state.json alike.
const ModelArgsKey = "model"

// Args is what a checkpoint records of the run's settings, for the checks
// on resume and for --use-checkpoint-args. Its JSON form is one object:
// the integer settings under their names and, when any model option
// differs from its default, the object "model" holding them:
//
//	"args": {"hidden_size": 64, …, "model": {"normalization": "RMSNorm"}}
//
// A checkpoint that predates the model options has no "model": every
// option is its default.
type Args struct {
	// Ints are the integer settings by Megatron's argument names: the
	// model's shape, the batch schedule, the parallel layout.
	Ints map[string]int
	// Model holds the model options that differ from their defaults, by
	// TransformerConfig's JSON names, each value as text ("RMSNorm",
	// "true", "0.5"); an option not listed has its default.
	Model map[string]string
}

// MarshalJSON writes a as one object (null when a holds nothing, as the
// arguments of a manifest without any).
func (a Args) MarshalJSON() ([]byte, error) {
	if a.Ints == nil && a.Model == nil {
		return []byte("null"), nil
	}
	m := make(map[string]any, len(a.Ints)+1)
	for k, v := range a.Ints {
		m[k] = v
	}
	if len(a.Model) > 0 {
		m[ModelArgsKey] = a.Model
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON wrote: integers, and "model" as an
// object of strings.
func (a *Args) UnmarshalJSON(b []byte) error {
	*a = Args{}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("args: %v", err)
	}
	a.Ints = make(map[string]int, len(raw))
	for k, v := range raw {
		if k == ModelArgsKey {
			if err := json.Unmarshal(v, &a.Model); err != nil {
				return fmt.Errorf("args: %q is not an object of strings (%v)", k, err)
			}
			continue
		}
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("args: %q is %s, not an integer", k, v)
		}
		a.Ints[k] = n
	}
	return nil
}

// wholeArgs returns a's arguments in the whole-tensor form's state.json
// (State.Args): the integers, and "model" as an object of strings. nil
// when a holds nothing.
func wholeArgs(a Args) map[string]any {
	if len(a.Ints) == 0 && len(a.Model) == 0 {
		return nil
	}
	out := make(map[string]any, len(a.Ints)+1)
	for k, v := range a.Ints {
		out[k] = v
	}
	if len(a.Model) > 0 {
		out[ModelArgsKey] = maps.Clone(a.Model)
	}
	return out
}

// manifestArgs reads the whole-tensor form's arguments back into Args:
// every one an integer, but "model", an object of strings.
func manifestArgs(in map[string]any) (Args, error) {
	rest := in
	var model map[string]string
	if v, ok := in[ModelArgsKey]; ok {
		var err error
		if model, err = modelArgs(v); err != nil {
			return Args{}, err
		}
		rest = maps.Clone(in)
		delete(rest, ModelArgsKey)
	}
	ints, err := intArgs(rest)
	if err != nil {
		return Args{}, err
	}
	return Args{Ints: ints, Model: model}, nil
}

// modelArgs reads the whole-tensor form's "model" argument: an object of
// strings (as decoded from JSON, or as ToWhole made it).
func modelArgs(v any) (map[string]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]string:
		return maps.Clone(x), nil
	case map[string]any:
		out := make(map[string]string, len(x))
		for k, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("argument %q: option %q is %v, not a string: the model options are recorded as text; fix state.json", ModelArgsKey, k, e)
			}
			out[k] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument %q is %v, not an object of strings (the model options): fix state.json", ModelArgsKey, v)
}
