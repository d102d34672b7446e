package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Embedding looks up rows of table [V, h] for ids (any shape S) and returns
// [S..., h]. Every id must lie in [0, V). The table's gradient is
// accumulated directly (scatter-add in id order, deterministic).
func Embedding(t *autograd.Tape, table *autograd.Var, ids []int32, shape ...int) *autograd.Var {
	return autograd.Apply(t, embeddingFn{table: table, ids: ids, shape: shape}, table)
}

type embeddingFn struct {
	table *autograd.Var
	ids   []int32
	shape []int
}

func (f embeddingFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	w := in[0]
	if err := CheckParam(f.table, "embedding table"); err != nil {
		return nil, err
	}
	v, h := w.Dim(0), w.Dim(1)
	n := 1
	for _, d := range f.shape {
		n *= d
	}
	if n != len(f.ids) {
		return nil, fmt.Errorf("nn: embedding %q: %d ids for shape %v", f.table.Name, len(f.ids), f.shape)
	}
	for i, id := range f.ids {
		if id < 0 || int(id) >= v {
			return nil, fmt.Errorf("nn: embedding %q: id %d at position %d is outside the vocabulary [0, %d)", f.table.Name, id, i, v)
		}
	}
	y := tensor.New(append(append([]int(nil), f.shape...), h)...)
	kernels.EmbeddingForward(y.Data(), w.Data(), f.ids, h)
	return y, nil
}

func (f embeddingFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	g := GradBuffer(f.table)
	kernels.EmbeddingBackward(g.Data(), dy.Data(), f.ids, g.Dim(1))
	return []*tensor.Tensor{nil}, nil
}

// AddPositionsAt returns x + pos[start:start+s] broadcast over the batch,
// for x [s, b, h] and pos [max_pos, h] (learned absolute position
// embeddings): the positions of a sequence that begins at position start —
// 0 for a whole sequence, r·s for sequence-parallel rank r's shard. pos
// accumulates its gradient directly: dpos[start+i] += Σ_b dy[i, b].
func AddPositionsAt(t *autograd.Tape, x, pos *autograd.Var, start int) *autograd.Var {
	return autograd.Apply(t, addPositionsFn{pos: pos, start: start}, x, pos)
}

type addPositionsFn struct {
	pos   *autograd.Var
	start int
}

func (f addPositionsFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, p := in[0].Contiguous(), in[1]
	if err := CheckParam(f.pos, "position embedding"); err != nil {
		return nil, err
	}
	if x.Rank() != 3 || x.Dim(2) != p.Dim(1) {
		return nil, fmt.Errorf("nn: position embedding: input %v, table %v", x.Shape(), p.Shape())
	}
	s, b, h := x.Dim(0), x.Dim(1), x.Dim(2)
	if f.start < 0 || f.start+s > p.Dim(0) {
		return nil, fmt.Errorf("nn: position embedding: positions [%d, %d) exceed max_position_embeddings %d", f.start, f.start+s, p.Dim(0))
	}
	y := x.Clone()
	yd, pd := y.Data(), p.Data()[f.start*h:]
	for i := 0; i < s; i++ {
		for j := 0; j < b; j++ {
			kernels.AddInto(yd[(i*b+j)*h:(i*b+j+1)*h], pd[i*h:(i+1)*h])
		}
	}
	return y, nil
}

func (f addPositionsFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	if c.NeedsGrad(1) { // a frozen (or constant) table gets no gradient
		s, b, h := dy.Dim(0), dy.Dim(1), dy.Dim(2)
		dp := GradBuffer(f.pos).Data()[f.start*h:]
		dd := dy.Data()
		for i := 0; i < s; i++ {
			kernels.ColumnSumInto(dp[i*h:(i+1)*h], dd[i*b*h:(i+1)*b*h], b, h)
		}
	}
	return []*tensor.Tensor{dy, nil}, nil
}
