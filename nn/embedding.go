package nn

import (
	"fmt"
	"slices"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Embedding looks up rows of table [V, h] for ids (any shape S) and returns
// [S..., h]. Every id must lie in [0, V). The table's gradient is
// accumulated directly (scatter-add in id order, deterministic, through
// AccumulateGrad).
//
// A bfloat16 or float16 table is read by widening only the looked-up rows
// (exactly); the output is float32. Into a 16-bit Grad the pass's
// scatter-add is summed in a float32 scratch of the table's size and added
// with one rounding per element.
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
	y := tensor.Empty(append(append([]int(nil), f.shape...), h)...)
	if w.DType().IsHalf() {
		LookupRows(y.Data(), w, f.ids, 0)
		return y, nil
	}
	kernels.EmbeddingForward(y.Data(), w.Data(), f.ids, h)
	return y, nil
}

func (f embeddingFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	h := f.table.Value.Dim(1)
	AccumulateGrad(c, f.table, func(dst []float32) { kernels.EmbeddingBackward(dst, dy.Data(), f.ids, h) })
	return []*tensor.Tensor{nil}, nil
}

// LookupRows writes row ids[i] − start of the 2-d table [rows, h] into
// out[i·h : (i+1)·h] for every id in [start, start+rows), widened to
// float32 from a 16-bit table (only those rows are read), and leaves the
// other rows of out alone: a vocabulary-parallel rank's lookup (start its
// first row), or with start 0 and in-range ids a whole-table lookup.
func LookupRows(out []float32, table *tensor.Tensor, ids []int32, start int) {
	rows, h := table.Dim(0), table.Dim(1)
	table = table.Contiguous()
	d := table.DType()
	var f32 []float32
	var bits []uint16
	if d.IsHalf() {
		bits = table.Bits()
	} else {
		f32 = table.Data()
	}
	for i, id := range ids {
		k := int(id) - start
		if k < 0 || k >= rows {
			continue
		}
		dst := out[i*h : (i+1)*h]
		if f32 != nil {
			copy(dst, f32[k*h:(k+1)*h])
		} else {
			tensor.WidenInto(d, dst, bits[k*h:(k+1)*h])
		}
	}
}

// AddPositionsAt returns x + pos[start:start+s] broadcast over the batch,
// for x [s, b, h] and pos [max_pos, h] (learned absolute position
// embeddings): the positions of a sequence that begins at position start —
// 0 for a whole sequence, r·s for sequence-parallel rank r's shard. pos
// accumulates its gradient directly: dpos[start+i] += Σ_b dy[i, b]
// (AccumulateGrad). A bfloat16 or float16 pos is read by widening only the
// rows [start, start+s); x, y and the sums are float32.
func AddPositionsAt(t *autograd.Tape, x, pos *autograd.Var, start int) *autograd.Var {
	return autograd.Apply(t, addPositionsFn{pos: pos, start: start}, x, pos)
}

// AddPositionsOf is AddPositionsAt for rows at any positions: row i of x
// [s, b, h] gets pos[positions[i]] (len(positions) = s), and
// dpos[positions[i]] += Σ_b dy[i, b]. Context parallelism uses it: a rank
// holds two chunks of the sequence, far apart. positions must not repeat.
func AddPositionsOf(t *autograd.Tape, x, pos *autograd.Var, positions []int) *autograd.Var {
	return autograd.Apply(t, addPositionsFn{pos: pos, at: positions}, x, pos)
}

type addPositionsFn struct {
	pos   *autograd.Var
	start int
	at    []int // the rows' positions (nil: start, start+1, …)
}

// row returns the position of row i.
func (f addPositionsFn) row(i int) int {
	if f.at != nil {
		return f.at[i]
	}
	return f.start + i
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
	lo, hi := f.start, f.start+s
	if f.at != nil {
		if len(f.at) != s {
			return nil, fmt.Errorf("nn: position embedding: %d positions for %d rows", len(f.at), s)
		}
		lo, hi = 0, 0
		if s > 0 {
			lo, hi = slices.Min(f.at), slices.Max(f.at)+1
		}
	}
	if lo < 0 || hi > p.Dim(0) {
		return nil, fmt.Errorf("nn: position embedding: positions [%d, %d) exceed max_position_embeddings %d", lo, hi, p.Dim(0))
	}
	y := x.Clone()
	yd, pd := y.Data(), values(p.Narrow(0, lo, hi-lo))
	for i := 0; i < s; i++ {
		r := f.row(i) - lo
		for j := 0; j < b; j++ {
			kernels.AddInto(yd[(i*b+j)*h:(i*b+j+1)*h], pd[r*h:(r+1)*h])
		}
	}
	return y, nil
}

func (f addPositionsFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	if c.NeedsGrad(1) { // a frozen (or constant) table gets no gradient
		s, b, h := dy.Dim(0), dy.Dim(1), dy.Dim(2)
		dd := dy.Data()
		AccumulateGrad(c, f.pos, func(dst []float32) {
			for i := 0; i < s; i++ {
				r := f.row(i)
				kernels.ColumnSumInto(dst[r*h:(r+1)*h], dd[i*b*h:(i+1)*b*h], b, h)
			}
		})
	}
	return []*tensor.Tensor{dy, nil}, nil
}

// AddTokenPositions is AddPositionsAt with a position per token: for x
// [s, b, h] and pos [max_pos, h], y[i, j] = x[i, j] + pos[ids[i·b + j]]
// (ids sequence-first, s·b entries: per-token position ids,
// --reset-position-ids). pos accumulates dpos[ids[k]] += dy[k] in token
// order (deterministic, as the word embedding's scatter-add). Every id must
// lie in [0, max_pos).
func AddTokenPositions(t *autograd.Tape, x, pos *autograd.Var, ids []int32) *autograd.Var {
	return autograd.Apply(t, tokenPositionsFn{pos: pos, ids: ids}, x, pos)
}

type tokenPositionsFn struct {
	pos *autograd.Var
	ids []int32
}

func (f tokenPositionsFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, p := in[0].Contiguous(), in[1]
	if err := CheckParam(f.pos, "position embedding"); err != nil {
		return nil, err
	}
	if x.Rank() != 3 || x.Dim(2) != p.Dim(1) {
		return nil, fmt.Errorf("nn: position embedding: input %v, table %v", x.Shape(), p.Shape())
	}
	s, b, h := x.Dim(0), x.Dim(1), x.Dim(2)
	if len(f.ids) != s*b {
		return nil, fmt.Errorf("nn: position embedding: %d position ids for %d tokens ([%d, %d])", len(f.ids), s*b, s, b)
	}
	for k, id := range f.ids {
		if id < 0 || int(id) >= p.Dim(0) {
			return nil, fmt.Errorf("nn: position embedding: position id %d of token (%d, %d) exceeds max_position_embeddings %d", id, k/b, k%b, p.Dim(0))
		}
	}
	rows := make([]float32, len(f.ids)*h)
	LookupRows(rows, p, f.ids, 0)
	y := x.Clone()
	kernels.AddInto(y.Data(), rows)
	return y, nil
}

func (f tokenPositionsFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	if c.NeedsGrad(1) { // a frozen (or constant) table gets no gradient
		h := dy.Dim(2)
		dd := dy.Contiguous().Data()
		AccumulateGrad(c, f.pos, func(dst []float32) { kernels.EmbeddingBackward(dst, dd, f.ids, h) })
	}
	return []*tensor.Tensor{dy, nil}, nil
}
