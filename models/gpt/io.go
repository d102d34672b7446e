package gpt

import (
	"fmt"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/nn"
)

// WeightTensors returns every parameter's value as a safetensors tensor
// under its Megatron name (sharing no memory with the model).
func WeightTensors(params []*nn.Parameter) []safetensors.Tensor {
	out := make([]safetensors.Tensor, 0, len(params))
	for _, p := range params {
		out = append(out, safetensors.F32(p.Name, p.Value.Shape(), p.Value.Data()))
	}
	return out
}

// GradTensors returns every parameter's gradient under its Megatron name;
// a parameter without a gradient contributes zeros.
func GradTensors(params []*nn.Parameter) []safetensors.Tensor {
	out := make([]safetensors.Tensor, 0, len(params))
	for _, p := range params {
		g := make([]float32, p.Value.Len())
		if p.Grad != nil {
			copy(g, p.Grad.Data())
		}
		out = append(out, safetensors.F32(p.Name, p.Value.Shape(), g))
	}
	return out
}

// LoadTensors copies tensors into the parameters with the same names. Every
// parameter must be present with its shape and no other tensor may be
// there; all differences are reported at once. source names the origin in
// errors (a file path, say).
func LoadTensors(params []*nn.Parameter, f *safetensors.File, source string) error {
	want := make(map[string][]int, len(params))
	for _, p := range params {
		want[p.Name] = p.Value.Shape()
	}
	if err := f.Check(want); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	for _, p := range params {
		t, _ := f.Get(p.Name)
		v, err := t.Float32()
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		copy(p.Value.Data(), v)
	}
	return nil
}
