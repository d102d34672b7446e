package dp

import (
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// Buffer holds a model chunk's parameters and their gradients in two
// contiguous arrays laid out by a Layout (the reference's
// _ParamAndGradBuffer): every parameter's Value is a view of ParamData and
// its Grad a view of GradData, at the parameter's range. Padding between
// parameters and at bucket ends belongs to no parameter and stays zero in
// GradData.
//
// ParamData holds ParamDType elements (float32, or bfloat16 / float16 for
// a mixed-precision model) and GradData GradDType elements (GradDTypeFor:
// float32 under grad_reduce_in_fp32 or for float32 parameters, else the
// parameters' type); the collectives carry them in these types.
//
// A parameter matched by param_name_patterns_for_fp32_local_accumulation
// (16-bit gradient buffers only) is the exception: its Grad is a float32
// tensor of its own, which backward accumulates into, and its range of
// GradData is the communication copy (Bucket.FP32GradParams).
type Buffer struct {
	Layout                Layout
	Params                []*nn.Parameter // registration order, one per Layout.Params entry
	ParamDType, GradDType tensor.DType
	ParamData             comm.Buffer // ParamDType, len Layout.Numel
	GradData              comm.Buffer // GradDType, len Layout.Numel
	Buckets               []*Bucket

	index   map[*nn.Parameter]int
	fp32Own map[*nn.Parameter]bool // parameters with a float32 Grad of their own
}

// Bucket is a range of a Buffer reduced by one collective.
type Bucket struct {
	ID                    int
	Start, End            int // elements [Start, End) of the buffer
	NumelUnpadded         int
	Params                []*nn.Parameter // in buffer order
	ParamData, GradData   comm.Buffer     // the bucket's views of the buffer, in its types
	GradientScalingFactor float32
	// FP32GradParams are the bucket's parameters, in buffer order, whose
	// Grad is a float32 tensor of their own (the reference's
	// params_with_extra_main_grads): before the bucket's reduction each is
	// rounded into its range of GradData, afterwards the range is widened
	// back into it.
	FP32GradParams []*nn.Parameter
}

// BufferOptions are NewBuffer's element types. The zero value is today's
// float32 buffer.
type BufferOptions struct {
	// ParamDType is the type of ParamData and of every parameter's Value.
	ParamDType tensor.DType
	// GradDType is the type of GradData: Float32 or ParamDType
	// (GradDTypeFor).
	GradDType tensor.DType
	// FP32LocalAccumulation is param_name_patterns_for_fp32_local_accumulation:
	// a parameter whose name matches one ("all" matches every name; else as
	// Python's fnmatch) gets a float32 Grad of its own. Only with a 16-bit
	// GradDType.
	FP32LocalAccumulation []string
}

// GradDTypeFor is the gradient buffer's type for parameters of type param
// (the reference's grad_dtype): float32 when gradReduceInFP32 or when the
// parameters are float32, else the parameters' type.
func GradDTypeFor(param tensor.DType, gradReduceInFP32 bool) tensor.DType {
	if gradReduceInFP32 {
		return tensor.Float32
	}
	return param
}

// NewBuffer moves params (in registration order) into contiguous storage
// laid out by l: each parameter's value is copied into ParamData —
// rounded to nearest even when ParamData is 16-bit and the value float32 —
// and its Value replaced by a view of the same shape; its Grad becomes a
// zeroed view of GradData, or a zeroed float32 tensor of its own when its
// name matches o.FP32LocalAccumulation. params must match l.Params by name
// and size.
func NewBuffer(params []*nn.Parameter, l Layout, o BufferOptions) (*Buffer, error) {
	if len(params) != len(l.Params) {
		return nil, fmt.Errorf("dp: %d parameters for a layout of %d", len(params), len(l.Params))
	}
	if err := checkDType("parameter type", o.ParamDType); err != nil {
		return nil, err
	}
	if o.GradDType != tensor.Float32 && o.GradDType != o.ParamDType {
		return nil, fmt.Errorf("dp: gradient type %v for %v parameters: gradients are float32 or of the parameters' type", o.GradDType, o.ParamDType)
	}
	if len(o.FP32LocalAccumulation) > 0 && !o.GradDType.IsHalf() {
		return nil, fmt.Errorf("dp: param_name_patterns_for_fp32_local_accumulation with a %v gradient buffer: every gradient accumulates in float32 already", o.GradDType)
	}
	b := &Buffer{Layout: l, Params: params, ParamDType: o.ParamDType, GradDType: o.GradDType,
		ParamData: newData(o.ParamDType, l.Numel), GradData: newData(o.GradDType, l.Numel),
		index: make(map[*nn.Parameter]int, len(params)), fp32Own: map[*nn.Parameter]bool{}}
	for i, p := range params {
		r := l.Ranges[i]
		if p.Name != l.Params[i].Name || p.Value.Len() != r.End-r.Start {
			return nil, fmt.Errorf("dp: parameter %d is %s of %d elements; the layout has %s of %d", i, p.Name, p.Value.Len(), l.Params[i].Name, r.End-r.Start)
		}
		if _, dup := b.index[p]; dup {
			return nil, fmt.Errorf("dp: parameter %s is listed twice", p.Name)
		}
		b.index[p] = i
		shape := p.Value.Shape()
		v := viewOf(b.ParamData, r.Start, r.End, shape)
		v.CopyFrom(p.Value)
		p.Value = v
		if matchesFP32Pattern(o.FP32LocalAccumulation, p.Name) {
			b.fp32Own[p] = true
			p.Grad = tensor.New(shape...)
		} else {
			p.Grad = viewOf(b.GradData, r.Start, r.End, shape)
		}
	}
	for id, br := range l.Buckets {
		bk := &Bucket{ID: id, Start: br.Start, End: br.End, NumelUnpadded: br.NumelUnpadded,
			ParamData: b.ParamData.Slice(br.Start, br.End), GradData: b.GradData.Slice(br.Start, br.End), GradientScalingFactor: 1}
		for _, i := range br.Params {
			bk.Params = append(bk.Params, params[i])
			if b.fp32Own[params[i]] {
				bk.FP32GradParams = append(bk.FP32GradParams, params[i])
			}
		}
		b.Buckets = append(b.Buckets, bk)
	}
	return b, nil
}

// Range returns p's range in the buffer and whether the buffer holds p.
func (b *Buffer) Range(p *nn.Parameter) (ParamRange, bool) {
	i, ok := b.index[p]
	if !ok {
		return ParamRange{}, false
	}
	return b.Layout.Ranges[i], true
}

// ParamIndex returns p's index in Params, or -1.
func (b *Buffer) ParamIndex(p *nn.Parameter) int {
	if i, ok := b.index[p]; ok {
		return i
	}
	return -1
}

// GradInBuffer returns p's range of GradData: the memory of p.Grad, or for
// a parameter with a float32 gradient of its own (HasFP32Grad) its
// communication copy. The zero Buffer if the buffer does not hold p.
func (b *Buffer) GradInBuffer(p *nn.Parameter) comm.Buffer {
	r, ok := b.Range(p)
	if !ok {
		return comm.Buffer{}
	}
	return b.GradData.Slice(r.Start, r.End)
}

// HasFP32Grad reports whether p's Grad is a float32 tensor of its own
// rather than a view of GradData
// (param_name_patterns_for_fp32_local_accumulation).
func (b *Buffer) HasFP32Grad(p *nn.Parameter) bool { return b.fp32Own[p] }

// copyInFP32Grads rounds the float32 gradients of bk's FP32GradParams into
// their ranges of GradData: g_buf = r(g), before the bucket's check,
// scaling and reduction.
func (b *Buffer) copyInFP32Grads(bk *Bucket) {
	for _, p := range bk.FP32GradParams {
		roundInto(b.GradInBuffer(p), p.Grad.Data())
	}
}

// copyBackFP32Grads widens the reduced ranges of GradData back into the
// float32 gradients of bk's FP32GradParams: g = w(g_buf) (the whole
// parameter; under the distributed optimizer only this rank's shard of it
// is reduced, as in the buffer).
func (b *Buffer) copyBackFP32Grads(bk *Bucket) {
	for _, p := range bk.FP32GradParams {
		widenInto(p.Grad.Data(), b.GradInBuffer(p))
	}
}
