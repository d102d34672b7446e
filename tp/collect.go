package tp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

// worldSize returns the size of g, 1 for a nil group.
func worldSize(g comm.Group) int {
	if g == nil {
		return 1
	}
	return g.Size()
}

// rankOf returns this rank's rank in g, 0 for a nil group.
func rankOf(g comm.Group) int {
	if g == nil {
		return 0
	}
	return g.Rank()
}

// groupName names g in errors.
func groupName(g comm.Group) string {
	if g == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %v", g.Name(), g.GlobalRanks())
}

// allReduce returns op over the group of x, as a new contiguous tensor
// (x is not modified).
func allReduce(ctx context.Context, g comm.Group, x *tensor.Tensor, op comm.ReduceOp, what string) (*tensor.Tensor, error) {
	y := x.Clone()
	if worldSize(g) == 1 {
		return y, nil
	}
	if err := g.AllReduce(ctx, comm.F32(y.Data()), op); err != nil {
		return nil, fmt.Errorf("tp: %s: all-reduce over %s: %w", what, groupName(g), err)
	}
	return y, nil
}

// bufferOf returns a comm.Buffer over the elements of the contiguous
// tensor t, of t's dtype (float32, bfloat16 or float16).
func bufferOf(t *tensor.Tensor) comm.Buffer {
	switch t.DType() {
	case tensor.BFloat16:
		return comm.BF16(t.Bits())
	case tensor.Float16:
		return comm.F16(t.Bits())
	}
	return comm.F32(t.Data())
}

// gatherFirst all-gathers x [n, ...] along dim 0 into [tp·n, ...], rank
// order, in x's dtype (a 16-bit x travels and is returned in 16 bits).
func gatherFirst(ctx context.Context, g comm.Group, x *tensor.Tensor, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if ws == 1 {
		return x.Contiguous(), nil
	}
	x = x.Contiguous()
	shape := append([]int(nil), x.Shape()...)
	shape[0] *= ws
	y := tensor.EmptyOf(x.DType(), shape...)
	if err := g.AllGather(ctx, bufferOf(y), bufferOf(x)); err != nil {
		return nil, fmt.Errorf("tp: %s: all-gather along dim 0 over %s: %w", what, groupName(g), err)
	}
	return y, nil
}

// gatherFirstV all-gathers x [sizes[rank], ...] along dim 0 into
// [Σ sizes, ...].
func gatherFirstV(ctx context.Context, g comm.Group, x *tensor.Tensor, sizes []int, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if len(sizes) != ws {
		return nil, fmt.Errorf("tp: %s: %d split sizes for a group of %d ranks", what, len(sizes), ws)
	}
	if x.Dim(0) != sizes[rankOf(g)] {
		return nil, fmt.Errorf("tp: %s: dim 0 is %d but this rank's split size is %d", what, x.Dim(0), sizes[rankOf(g)])
	}
	if ws == 1 {
		return x.Contiguous(), nil
	}
	x = x.Contiguous()
	row := x.Len() / max(x.Dim(0), 1)
	if x.Dim(0) == 0 {
		row = 1
		for _, d := range x.Shape()[1:] {
			row *= d
		}
	}
	counts := make([]int, ws)
	total := 0
	for i, s := range sizes {
		counts[i] = s * row
		total += s
	}
	shape := append([]int(nil), x.Shape()...)
	shape[0] = total
	y := tensor.Empty(shape...)
	if err := g.AllGatherV(ctx, comm.F32(y.Data()), comm.F32(x.Data()), counts); err != nil {
		return nil, fmt.Errorf("tp: %s: uneven all-gather along dim 0 over %s: %w", what, groupName(g), err)
	}
	return y, nil
}

// reduceScatterFirst reduces x [tp·n, ...] over the group and keeps this
// rank's chunk [n, ...] of dim 0.
func reduceScatterFirst(ctx context.Context, g comm.Group, x *tensor.Tensor, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if ws == 1 {
		return x.Clone(), nil
	}
	if x.Dim(0)%ws != 0 {
		return nil, fmt.Errorf("tp: %s: first dimension of the tensor (%d) should be divisible by tensor parallel size %d", what, x.Dim(0), ws)
	}
	x = x.Contiguous()
	shape := append([]int(nil), x.Shape()...)
	shape[0] /= ws
	y := tensor.Empty(shape...)
	if err := g.ReduceScatter(ctx, comm.F32(y.Data()), comm.F32(x.Data()), comm.Sum); err != nil {
		return nil, fmt.Errorf("tp: %s: reduce-scatter along dim 0 over %s: %w", what, groupName(g), err)
	}
	return y, nil
}

// reduceScatterFirstV reduces x [Σ sizes, ...] and keeps this rank's
// chunk [sizes[rank], ...].
func reduceScatterFirstV(ctx context.Context, g comm.Group, x *tensor.Tensor, sizes []int, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if len(sizes) != ws {
		return nil, fmt.Errorf("tp: %s: %d split sizes for a group of %d ranks", what, len(sizes), ws)
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	if x.Dim(0) != total {
		return nil, fmt.Errorf("tp: %s: dim 0 is %d but the split sizes %v sum to %d", what, x.Dim(0), sizes, total)
	}
	if ws == 1 {
		return x.Clone(), nil
	}
	x = x.Contiguous()
	row := 1
	for _, d := range x.Shape()[1:] {
		row *= d
	}
	counts := make([]int, ws)
	for i, s := range sizes {
		counts[i] = s * row
	}
	shape := append([]int(nil), x.Shape()...)
	shape[0] = sizes[rankOf(g)]
	y := tensor.Empty(shape...)
	if err := g.ReduceScatterV(ctx, comm.F32(y.Data()), comm.F32(x.Data()), counts, comm.Sum); err != nil {
		return nil, fmt.Errorf("tp: %s: uneven reduce-scatter along dim 0 over %s: %w", what, groupName(g), err)
	}
	return y, nil
}

// splitFirst returns a contiguous copy of this rank's chunk of dim 0:
// rows [rank·n/tp, (rank+1)·n/tp).
func splitFirst(g comm.Group, x *tensor.Tensor, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if ws == 1 {
		return x, nil
	}
	n := x.Dim(0)
	if n%ws != 0 {
		return nil, fmt.Errorf("tp: %s: first dimension of the tensor (%d) should be divisible by tensor parallel size %d", what, n, ws)
	}
	c := n / ws
	// A copy, not a view: the rank keeps its chunk only, and a view would
	// keep the whole tensor alive as long as the chunk is.
	return x.Narrow(0, rankOf(g)*c, c).Clone(), nil
}

// splitLast returns a contiguous copy of this rank's chunk of the last
// dimension.
func splitLast(g comm.Group, x *tensor.Tensor, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if ws == 1 {
		return x, nil
	}
	n := x.Dim(-1)
	if n%ws != 0 {
		return nil, fmt.Errorf("tp: %s: last dimension of the tensor (%d) should be divisible by tensor parallel size %d", what, n, ws)
	}
	c := n / ws
	return x.Narrow(x.Rank()-1, rankOf(g)*c, c).Contiguous(), nil
}

// gatherLast all-gathers x [..., n] along the last dimension into
// [..., tp·n], rank order.
func gatherLast(ctx context.Context, g comm.Group, x *tensor.Tensor, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if ws == 1 {
		return x.Contiguous(), nil
	}
	x = x.Contiguous()
	n := x.Dim(-1)
	rows := x.Len() / max(n, 1)
	buf := tensor.Empty(ws, rows, n)
	if err := g.AllGather(ctx, comm.F32(buf.Data()), comm.F32(x.Data())); err != nil {
		return nil, fmt.Errorf("tp: %s: all-gather along the last dim over %s: %w", what, groupName(g), err)
	}
	shape := append([]int(nil), x.Shape()...)
	shape[len(shape)-1] = ws * n
	// [tp, rows, n] → [rows, tp, n] → [..., tp·n]
	return buf.Permute(1, 0, 2).Contiguous().View(shape...), nil
}

// reduceScatterLast reduces x [..., tp·n] over the group and keeps this
// rank's chunk [..., n] of the last dimension.
func reduceScatterLast(ctx context.Context, g comm.Group, x *tensor.Tensor, what string) (*tensor.Tensor, error) {
	ws := worldSize(g)
	if ws == 1 {
		return x.Clone(), nil
	}
	full := x.Dim(-1)
	if full%ws != 0 {
		return nil, fmt.Errorf("tp: %s: last dimension of the tensor (%d) should be divisible by tensor parallel size %d", what, full, ws)
	}
	n := full / ws
	rows := x.Len() / max(full, 1)
	// [rows, tp, n] → [tp, rows, n], so chunk r is contiguous.
	in := x.Contiguous().View(rows, ws, n).Permute(1, 0, 2).Contiguous()
	shape := append([]int(nil), x.Shape()...)
	shape[len(shape)-1] = n
	y := tensor.Empty(shape...)
	if err := g.ReduceScatter(ctx, comm.F32(y.Data()), comm.F32(in.Data()), comm.Sum); err != nil {
		return nil, fmt.Errorf("tp: %s: reduce-scatter along the last dim over %s: %w", what, groupName(g), err)
	}
	return y, nil
}
