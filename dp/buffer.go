package dp

import (
	"fmt"

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
// The buffer's dtype is float32, gotron's compute type, for parameters and
// gradients alike.
type Buffer struct {
	Layout    Layout
	Params    []*nn.Parameter // registration order, one per Layout.Params entry
	ParamData []float32       // len Layout.Numel
	GradData  []float32       // len Layout.Numel
	Buckets   []*Bucket

	index map[*nn.Parameter]int
}

// Bucket is a range of a Buffer reduced by one collective.
type Bucket struct {
	ID                    int
	Start, End            int // elements [Start, End) of the buffer
	NumelUnpadded         int
	Params                []*nn.Parameter // in buffer order
	ParamData, GradData   []float32       // the bucket's views of the buffer
	GradientScalingFactor float32
}

// NewBuffer moves params (in registration order) into contiguous storage
// laid out by l: each parameter's value is copied into ParamData and its
// Value replaced by a view of the same shape; its Grad becomes a zeroed view
// of GradData. params must match l.Params by name and size.
func NewBuffer(params []*nn.Parameter, l Layout) (*Buffer, error) {
	if len(params) != len(l.Params) {
		return nil, fmt.Errorf("dp: %d parameters for a layout of %d", len(params), len(l.Params))
	}
	b := &Buffer{Layout: l, Params: params, ParamData: make([]float32, l.Numel), GradData: make([]float32, l.Numel),
		index: make(map[*nn.Parameter]int, len(params))}
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
		copy(b.ParamData[r.Start:r.End], p.Value.Contiguous().Data())
		p.Value = tensor.FromSlice(b.ParamData[r.Start:r.End:r.End], shape...)
		p.Grad = tensor.FromSlice(b.GradData[r.Start:r.End:r.End], shape...)
	}
	for id, br := range l.Buckets {
		bk := &Bucket{ID: id, Start: br.Start, End: br.End, NumelUnpadded: br.NumelUnpadded,
			ParamData: b.ParamData[br.Start:br.End:br.End], GradData: b.GradData[br.Start:br.End:br.End], GradientScalingFactor: 1}
		for _, i := range br.Params {
			bk.Params = append(bk.Params, params[i])
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

// shardOf returns rank r's shard [r·n/k, (r+1)·n/k) of a bucket's data
// split k ways (the reference's shard_buffer).
func shardOf(data []float32, k, r int) []float32 {
	m := len(data) / k
	return data[r*m : (r+1)*m : (r+1)*m]
}
