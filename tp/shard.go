package tp

import (
	"context"
	"fmt"
	"slices"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// FullShape returns the shape of p's master tensor on a tensor-parallel
// group of ws ranks: p's shape with dim PartitionDim multiplied by ws when p
// is tensor-parallel, else p's shape.
func FullShape(p *nn.Parameter, ws int) []int {
	s := append([]int(nil), p.Value.Shape()...)
	if p.Partitioned() {
		s[p.PartitionDim] *= ws
	}
	return s
}

// GatherPartitioned reassembles the master tensor of a tensor-parallel
// parameter from every rank's local tensor (shaped as p: its value, its
// gradient or an optimizer moment): an all-gather over g, then the strided
// chunks put back in order (rank r's chunk k is master chunk k·ws + r of
// size partition/stride along PartitionDim, the inverse of
// InitializeAffineWeightCPU). A parameter that is not tensor-parallel is
// returned as it is. The gather is in local's dtype: a bfloat16 or float16
// tensor (a mixed-precision value or gradient) is reassembled in 16 bits.
// Every member of g must call it.
func GatherPartitioned(ctx context.Context, g comm.Group, p *nn.Parameter, local *tensor.Tensor) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if !p.Partitioned() || ws == 1 {
		return local, nil
	}
	local = local.Contiguous()
	all := tensor.NewOf(local.DType(), append([]int{ws}, local.Shape()...)...)
	if err := g.AllGather(ctx, bufferOf(all), bufferOf(local)); err != nil {
		return nil, fmt.Errorf("tp: gathering %s over %s: %w", p.Name, groupName(g), err)
	}
	stride := max(p.PartitionStride, 1)
	dim := p.PartitionDim
	per := local.Dim(dim)
	if per%stride != 0 {
		return nil, fmt.Errorf("tp: %s: partition size %d is not divisible by its stride %d", p.Name, per, stride)
	}
	c := per / stride
	parts := make([]*tensor.Tensor, 0, stride*ws)
	for j := 0; j < stride*ws; j++ {
		r, k := j%ws, j/ws
		parts = append(parts, all.Narrow(0, r, 1).View(local.Shape()...).Narrow(dim, k*c, c))
	}
	return tensor.Cat(dim, parts...), nil
}

// PartitionOf returns rank's partition (a new tensor shaped as p) of a
// master tensor full of FullShape(p, ws), the chunks rank, rank+ws, … of
// size partition/stride along PartitionDim. A parameter that is not
// tensor-parallel gets a copy of full.
func PartitionOf(p *nn.Parameter, full *tensor.Tensor, rank, ws int) (*tensor.Tensor, error) {
	want := FullShape(p, ws)
	if !slices.Equal(full.Shape(), want) {
		return nil, fmt.Errorf("tp: %s: the master tensor is %v, want %v for %d tensor-parallel ranks", p.Name, full.Shape(), want, ws)
	}
	if !p.Partitioned() || ws == 1 {
		return full.Clone(), nil
	}
	dim, stride := p.PartitionDim, max(p.PartitionStride, 1)
	per := p.Value.Dim(dim)
	c := per / stride
	var mine []*tensor.Tensor
	for k := rank; k*c < full.Dim(dim); k += ws {
		mine = append(mine, full.Narrow(dim, k*c, c))
	}
	return tensor.Cat(dim, mine...), nil
}
