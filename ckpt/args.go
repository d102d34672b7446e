package ckpt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// ModelArgsKey is the key of the model options within a checkpoint's
// arguments (Args.Model), in the manifest and in the whole-tensor
// form's state.json alike.
const ModelArgsKey = "model"

// DataArgsKey is the key of the data settings within a checkpoint's
// arguments (Args.Data).
const DataArgsKey = "data"

// SchedulerArgsKey is the key of the learning-rate and weight-decay
// schedule within a checkpoint's arguments (Args.Scheduler), Megatron's
// opt_param_scheduler.
const SchedulerArgsKey = "opt_param_scheduler"

// textArgKeys are the arguments held as objects of strings.
var textArgKeys = []string{ModelArgsKey, DataArgsKey, SchedulerArgsKey}

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
	// Data holds the data settings as text by Megatron's argument names
	// ("tokenizer_type", "data_path", "split", "seed"); absent in
	// checkpoints that predate them.
	Data map[string]string
	// Scheduler holds the learning-rate and weight-decay schedule as text
	// ("max_lr", "lr_decay_steps", …), checked on resume as Megatron's
	// OptimizerParamScheduler checks its state; absent in checkpoints
	// that predate it.
	Scheduler map[string]string
}

// text returns a's maps of strings, in textArgKeys' order.
func (a *Args) text() []*map[string]string {
	return []*map[string]string{&a.Model, &a.Data, &a.Scheduler}
}

// MarshalJSON writes a as one object (null when a holds nothing, as the
// arguments of a manifest without any).
func (a Args) MarshalJSON() ([]byte, error) {
	if a.Ints == nil && a.Model == nil && a.Data == nil && a.Scheduler == nil {
		return []byte("null"), nil
	}
	return json.Marshal(wholeArgs(a))
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
		if i := slices.Index(textArgKeys, k); i >= 0 {
			dst := a.text()[i]
			if err := json.Unmarshal(v, dst); err != nil {
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
	if len(a.Ints) == 0 && len(a.Model) == 0 && len(a.Data) == 0 && len(a.Scheduler) == 0 {
		return nil
	}
	out := make(map[string]any, len(a.Ints)+len(textArgKeys))
	for k, v := range a.Ints {
		out[k] = v
	}
	for i, m := range a.text() {
		if len(*m) > 0 {
			out[textArgKeys[i]] = maps.Clone(*m)
		}
	}
	return out
}

// manifestArgs reads the whole-tensor form's arguments back into Args:
// every one an integer, but "model", an object of strings.
func manifestArgs(in map[string]any) (Args, error) {
	rest := in
	var text [3]map[string]string
	for i, key := range textArgKeys {
		if v, ok := in[key]; ok {
			var err error
			if text[i], err = stringArgs(key, v); err != nil {
				return Args{}, err
			}
			rest = maps.Clone(rest)
			delete(rest, key)
		}
	}
	ints, err := intArgs(rest)
	if err != nil {
		return Args{}, err
	}
	return Args{Ints: ints, Model: text[0], Data: text[1], Scheduler: text[2]}, nil
}

// stringArgs reads the whole-tensor form's "model" or "data" argument
// (key): an object of strings (as decoded from JSON, or as ToWhole made
// it).
func stringArgs(key string, v any) (map[string]string, error) {
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
				return nil, fmt.Errorf("argument %q: option %q is %v, not a string: the options are recorded as text; fix state.json", key, k, e)
			}
			out[k] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument %q is %v, not an object of strings: fix state.json", key, v)
}
