package gpt

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tp"
)

// FullTensors gathers, for every parameter in order, the whole tensor of
// which of(p) is this rank's partition (p's value, gradient or an optimizer
// moment, shaped as p), under p's Megatron name: tensor-parallel partitions
// are gathered over TP (an expert's over expert TP) and the word embedding (and an untied output
// layer) is cut to the real
// vocabulary. The result is the same for every TP size, which makes weight,
// gradient and checkpoint files independent of the layout. Every TP rank
// must call it; a nil of(p) contributes zeros. A chunk holds its
// expert-parallel rank's experts only: the others' tensors are not in the
// result.
func (m *Model) FullTensors(ctx context.Context, of func(p *nn.Parameter) *tensor.Tensor) ([]safetensors.Tensor, error) {
	out := make([]safetensors.Tensor, 0, len(m.params))
	for _, p := range m.params {
		local := of(p)
		if local == nil {
			local = tensor.New(p.Value.Shape()...)
		}
		full, err := tp.GatherPartitioned(ctx, m.partitionGroup(p), p, local)
		if err != nil {
			return nil, err
		}
		shape := m.fullShape(p)
		if p == m.WordEmbeddings || p == m.OutputWeight {
			full = full.Narrow(0, 0, shape[0])
		}
		out = append(out, safetensors.F32(p.Name, shape, append([]float32(nil), full.Contiguous().Data()...)))
	}
	return out, nil
}

// WeightTensors returns every parameter's whole value (see FullTensors).
func (m *Model) WeightTensors(ctx context.Context) ([]safetensors.Tensor, error) {
	return m.FullTensors(ctx, func(p *nn.Parameter) *tensor.Tensor { return p.Value })
}

// GradTensors returns every parameter's whole gradient (see FullTensors);
// a parameter without a gradient contributes zeros.
func (m *Model) GradTensors(ctx context.Context) ([]safetensors.Tensor, error) {
	return m.FullTensors(ctx, func(p *nn.Parameter) *tensor.Tensor { return p.Grad })
}

// LoadTensors copies whole tensors (as WeightTensors gives them, with the
// real vocabulary) from f into the chunk's parameters with the same names,
// each rank keeping its partition; the word embedding's padding rows are
// set to zero (an untied output layer's too). f must hold exactly the whole model's parameters
// (ParameterShapes), whatever part this chunk holds; all differences are
// reported at once. source names the origin in errors (a file path, say).
func (m *Model) LoadTensors(f *safetensors.File, source string) error {
	return m.LoadInto(f, source, "", func(p *nn.Parameter) *tensor.Tensor { return p.Value })
}

// LoadInto is LoadTensors for any per-parameter tensor shaped as the
// parameter (an optimizer moment, say): the tensor named prefix+p.Name in f
// is partitioned into into(p). With no prefix (the weights) f may also
// hold the MoE layers' expert biases (BufferShapes), which are loaded.
func (m *Model) LoadInto(f *safetensors.File, source, prefix string, into func(p *nn.Parameter) *tensor.Tensor) error {
	whole := ParameterShapes(m.Config)
	want := make(map[string][]int, len(whole))
	for name, s := range whole {
		want[prefix+name] = s
	}
	if prefix == "" {
		// The expert biases, when the file has them (a converted
		// checkpoint does; a weight file of parameters alone does not).
		for name, shape := range BufferShapes(m.Config) {
			if _, ok := f.Get(name); ok {
				want[name] = shape
			}
		}
	}
	if err := f.Check(want); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	for _, p := range m.params {
		ws, rank := m.partitionSize(p)
		t, _ := f.Get(prefix + p.Name)
		v, err := t.Float32()
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		full := tensor.New(tp.FullShape(p, ws)...)
		copy(full.Data(), v) // the word embedding's padding rows stay zero
		part, err := tp.PartitionOf(p, full, rank, ws)
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		into(p).CopyFrom(part)
	}
	if prefix != "" {
		return nil
	}
	for name, bias := range m.ExpertBiases() {
		if t, ok := f.Get(name); ok {
			v, err := t.Float32()
			if err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			copy(bias, v)
		}
	}
	return nil
}
