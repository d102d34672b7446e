package ckpt

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// TestArgsJSON: the model options are the object "model" among the
// integer arguments; a manifest's arguments without it (older than the
// model options) read as integers alone; null reads as nothing; anything
// else is refused naming the argument.
func TestArgsJSON(t *testing.T) {
	a := Args{Ints: map[string]int{"hidden_size": 64, "num_layers": 2}, Model: map[string]string{"normalization": "RMSNorm", "rotary_percent": "0.5"}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"hidden_size":64,"model":{"normalization":"RMSNorm","rotary_percent":"0.5"},"num_layers":2}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back Args
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, a) {
		t.Errorf("read back %+v (%v), want %+v", back, err, a)
	}

	if b, _ := json.Marshal(Args{Ints: map[string]int{"num_layers": 2}}); string(b) != `{"num_layers":2}` {
		t.Errorf("no model options: %s, want no \"model\"", b)
	}
	if err := json.Unmarshal([]byte(`{"num_layers": 2, "hidden_size": 64}`), &back); err != nil ||
		!reflect.DeepEqual(back, Args{Ints: map[string]int{"num_layers": 2, "hidden_size": 64}}) {
		t.Errorf("old arguments: %+v, %v", back, err)
	}
	if b, _ := json.Marshal(Args{}); string(b) != "null" {
		t.Errorf("no arguments: %s, want null", b)
	}
	back = a
	if err := json.Unmarshal([]byte(`null`), &back); err != nil || !reflect.DeepEqual(back, Args{}) {
		t.Errorf("null: %+v, %v", back, err)
	}

	for in, want := range map[string]string{
		`{"num_layers": "2"}`:                   `"num_layers" is "2", not an integer`,
		`{"lr": 0.001}`:                         `"lr" is 0.001, not an integer`,
		`{"model": {"qk_layernorm": true}}`:     `"model" is not an object of strings`,
		`{"model": ["normalization"]}`:          `"model" is not an object of strings`,
		`[1, 2]`:                                "args: ",
		`{"model": {"normalization": "RMSNorm"`: "",
	} {
		var x Args
		err := json.Unmarshal([]byte(in), &x)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}
}

// TestWholeKeepsModelArgs: converting to the whole-tensor form and back,
// directly and through state.json, keeps the model options; state.json
// holds them as the object "model" among the arguments; a "model" that is
// not an object of strings is refused.
func TestWholeKeepsModelArgs(t *testing.T) {
	whole := func(model any) *Checkpoint {
		args := map[string]any{"num_layers": 2}
		if model != nil {
			args[ModelArgsKey] = model
		}
		return &Checkpoint{
			State:     State{Iteration: 2, OptimizerSteps: 2, Args: args},
			Model:     []safetensors.Tensor{safetensors.F32("w", []int{2}, []float32{1, 2})},
			Optimizer: []safetensors.Tensor{safetensors.F32("exp_avg.w", []int{2}, []float32{1, 2})},
		}
	}
	want := Args{Ints: map[string]int{"num_layers": 2}, Model: map[string]string{"normalization": "RMSNorm", "qk_layernorm": "true"}}
	dir := t.TempDir()
	if err := FromWhole(dir, whole(map[string]any{"normalization": "RMSNorm", "qk_layernorm": "true"}), Layout{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !reflect.DeepEqual(r.Manifest.Args, want) {
		t.Errorf("manifest args %+v, want %+v", r.Manifest.Args, want)
	}
	c, err := ToWhole(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.State.Args[ModelArgsKey]; !reflect.DeepEqual(got, want.Model) {
		t.Errorf("whole-tensor model args %#v, want %#v", got, want.Model)
	}
	wd := t.TempDir()
	if err := Save(wd, c); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(wd)
	if err != nil {
		t.Fatal(err)
	}
	back := t.TempDir()
	if err := FromWhole(back, loaded, WholeLayout(loaded.State)); err != nil {
		t.Fatal(err)
	}
	rb, err := Open(back)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	if !reflect.DeepEqual(rb.Manifest.Args, want) {
		t.Errorf("after state.json: manifest args %+v, want %+v", rb.Manifest.Args, want)
	}

	for name, model := range map[string]any{
		"not strings":   map[string]any{"qk_layernorm": true},
		"not an object": "RMSNorm",
	} {
		err := FromWhole(t.TempDir(), whole(model), Layout{})
		if err == nil || !strings.Contains(err.Error(), `"model"`) || !strings.Contains(err.Error(), "fix state.json") {
			t.Errorf("%s: %v, want an error naming the argument \"model\"", name, err)
		}
	}
}
