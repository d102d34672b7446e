package tp

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// VocabParallelEmbedding is an embedding table [V, h] split along the
// vocabulary over a tensor-parallel group (Megatron's
// VocabParallelEmbedding, docs/SEMANTICS.md § Vocabulary split and weight
// initialisation): rank r holds the rows
// [VocabStart, VocabEnd) = [r·V/tp, (r+1)·V/tp).
type VocabParallelEmbedding struct {
	// Weight is this rank's rows [V/tp, h] (TensorModelParallel,
	// PartitionDim 0, PartitionStride 1).
	Weight *nn.Parameter
	// NumEmbeddings is the global (padded) vocabulary V; EmbeddingDim is h.
	NumEmbeddings, EmbeddingDim int
	// VocabStart and VocabEnd bound this rank's rows, half-open.
	VocabStart, VocabEnd int
	// ReduceScatterEmbeddings reduce-scatters the output along the sequence
	// (dim 0) instead of all-reducing it: [s, b, h] → [s/tp, b, h], the
	// input of a sequence-parallel region.
	ReduceScatterEmbeddings bool
	// Group is the tensor-parallel group; nil means one rank.
	Group comm.Group
}

// EmbeddingOption sets an optional setting of NewVocabParallelEmbedding.
type EmbeddingOption func(*VocabParallelEmbedding)

// WithReduceScatterEmbeddings sets ReduceScatterEmbeddings (Megatron's
// reduce_scatter_embeddings): Forward reduce-scatters its output along dim
// 0 instead of all-reducing it.
func WithReduceScatterEmbeddings(on bool) EmbeddingOption {
	return func(e *VocabParallelEmbedding) { e.ReduceScatterEmbeddings = on }
}

// NewVocabParallelEmbedding builds this rank's part of an embedding of
// numEmbeddings rows (the padded vocabulary, divisible by the size of g)
// of embeddingDim values. The weight is named name + ".weight" (e.g.
// "embedding.word_embeddings.weight") and initialised by
// InitializeAffineWeightCPU: init fills the whole master table
// [numEmbeddings, embeddingDim] and the rank keeps its rows, so every TP
// size starts from the same table. (A row-major init draws the real rows
// first, so they do not depend on how much padding follows them.)
func NewVocabParallelEmbedding(name string, numEmbeddings, embeddingDim int, g comm.Group, init InitMethod, opts ...EmbeddingOption) (*VocabParallelEmbedding, error) {
	ws, rank := worldSize(g), rankOf(g)
	if numEmbeddings <= 0 || embeddingDim <= 0 {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: sizes %d × %d must be positive", name, numEmbeddings, embeddingDim)
	}
	if init == nil {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: the InitMethod is nil; give one (it fills the whole master table)", name)
	}
	start, end, err := VocabRangeFromGlobalVocabSize(numEmbeddings, rank, ws)
	if err != nil {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: %w", name, err)
	}
	e := &VocabParallelEmbedding{
		NumEmbeddings: numEmbeddings,
		EmbeddingDim:  embeddingDim,
		VocabStart:    start,
		VocabEnd:      end,
		Group:         g,
	}
	for _, o := range opts {
		o(e)
	}
	w := tensor.New(end-start, embeddingDim)
	if _, err := InitializeAffineWeightCPU(w, numEmbeddings, embeddingDim, end-start, 0, init, 1, rank, ws, false); err != nil {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: %w", name, err)
	}
	e.Weight = nn.NewParameter(name+".weight", w)
	e.Weight.TensorModelParallel, e.Weight.PartitionDim, e.Weight.PartitionStride = true, 0, 1
	return e, nil
}

// Parameters returns the weight.
func (e *VocabParallelEmbedding) Parameters() []*nn.Parameter { return []*nn.Parameter{e.Weight} }

// Forward looks up ids (shape S, sequence-first: [s, b] for a GPT, already
// in the order the reference reaches by transposing [b, s] → [s, b]) and
// returns [S..., h], or with ReduceScatterEmbeddings [s/tp, S[1:]..., h].
// An empty shape means [len(ids)].
//
// Each rank gathers the rows it holds and writes zeros for the ids it does
// not hold (the reference substitutes row 0 and zeroes the output), then
// the partial outputs are summed over Group: an all-reduce
// (ReduceFromTensorModelParallelRegion), or a reduce-scatter along dim 0
// (ReduceScatterToSequenceParallelRegion). Exactly one rank contributes a
// non-zero row per id and x + 0 is exact, so the output is bitwise the
// serial lookup. Backward scatter-adds dy into the Weight's Grad directly
// (nn.AccumulateGrad), in id order, so the gradient rows are bitwise those
// of nn.Embedding on the whole table.
//
// A bfloat16 or float16 Weight is read by widening only the looked-up rows
// this rank holds (exactly), so the output and its reduction are float32
// and equal the lookup in the float32 table of the same values. Into a
// 16-bit Grad the pass's scatter-add is summed in a float32 scratch of the
// rank's rows and added with one rounding per element.
//
// Ids outside [0, NumEmbeddings) are an error on every rank (every rank
// sees the same ids), as is a dim 0 not divisible by tp under
// ReduceScatterEmbeddings. Errors of the autograd operations (a weight that
// is not a leaf, a failed collective) come from the tape.
func (e *VocabParallelEmbedding) Forward(t *autograd.Tape, ids []int32, shape ...int) (*autograd.Var, error) {
	if len(shape) == 0 {
		shape = []int{len(ids)}
	}
	n := 1
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("tp: vocab parallel embedding %q: negative dimension in the ids' shape %v", e.name(), shape)
		}
		n *= d
	}
	if n != len(ids) {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: %d ids for shape %v (%d); pass the ids' shape", e.name(), len(ids), shape, n)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= e.NumEmbeddings {
			return nil, fmt.Errorf("tp: vocab parallel embedding %q: id %d at position %d is outside the vocabulary [0, %d); check the tokenizer and the model's vocab size", e.name(), id, i, e.NumEmbeddings)
		}
	}
	ws := worldSize(e.Group)
	if e.ReduceScatterEmbeddings && ws > 1 && shape[0]%ws != 0 {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: with ReduceScatterEmbeddings the sequence length (dim 0 of the ids' shape %v) must be divisible by the tensor-parallel size %d", e.name(), shape, ws)
	}
	y := autograd.Apply(t, &vocabEmbeddingFn{e: e, ids: ids, shape: shape}, e.Weight.Var)
	switch {
	case ws == 1:
	case e.ReduceScatterEmbeddings:
		y = ReduceScatterToSequenceParallelRegion(t, y, e.Group, nil)
	default:
		y = ReduceFromTensorModelParallelRegion(t, y, e.Group)
	}
	if y.Value == nil {
		return nil, t.Err()
	}
	return y, nil
}

// name names the layer in errors.
func (e *VocabParallelEmbedding) name() string {
	if e.Weight != nil {
		return e.Weight.Name
	}
	return "embedding"
}

// vocabEmbeddingFn is the local lookup of VocabParallelEmbedding: the
// rank's partial output, rows it does not hold zero.
type vocabEmbeddingFn struct {
	e     *VocabParallelEmbedding
	ids   []int32
	shape []int
}

// Forward implements autograd.Function.
func (f *vocabEmbeddingFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	e := f.e
	w := in[0]
	v := e.Weight.Var
	if !v.IsLeaf() {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: the weight is the output of another operation; pass the parameter itself (its gradient is accumulated into it directly)", e.name())
	}
	if v.Grad != nil && !v.Grad.IsContiguous() {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: the weight's gradient %v is not contiguous; gradient buffers must be contiguous", e.name(), v.Grad.Shape())
	}
	rowsHeld, h := e.VocabEnd-e.VocabStart, e.EmbeddingDim
	if w.Rank() != 2 || w.Dim(0) != rowsHeld || w.Dim(1) != h {
		return nil, fmt.Errorf("tp: vocab parallel embedding %q: the weight is %v, want [%d, %d]", e.name(), w.Shape(), rowsHeld, h)
	}
	w = w.Contiguous()
	y := tensor.New(append(append([]int(nil), f.shape...), h)...)
	yd := y.Data()
	if worldSize(e.Group) == 1 && !w.DType().IsHalf() {
		kernels.EmbeddingForward(yd, w.Data(), f.ids, h)
		return y, nil
	}
	// The rows held here (widened from 16 bits); the others stay zero.
	nn.LookupRows(yd, w, f.ids, e.VocabStart)
	return y, nil
}

// Backward implements autograd.Function: dW[id − start] += dy[i] for the
// ids this rank holds, in order.
func (f *vocabEmbeddingFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	if !c.NeedsGrad(0) {
		return []*tensor.Tensor{nil}, nil
	}
	e := f.e
	h := e.EmbeddingDim
	dd := dy.Data()
	rowsHeld := e.VocabEnd - e.VocabStart
	one := worldSize(e.Group) == 1
	nn.AccumulateGrad(c, e.Weight.Var, func(gd []float32) {
		if one {
			kernels.EmbeddingBackward(gd, dd, f.ids, h)
			return
		}
		for i, id := range f.ids {
			if k := int(id) - e.VocabStart; k >= 0 && k < rowsHeld {
				kernels.AddInto(gd[k*h:k*h+h], dd[i*h:i*h+h])
			}
		}
	})
	return []*tensor.Tensor{nil}, nil
}
