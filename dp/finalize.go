package dp

import (
	"context"
	"fmt"
	"slices"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// FinalizeOptions are the groups and settings FinalizeModelGrads needs
// beyond the model chunks (Megatron's pg_collection, num_tokens and the
// config's sequence_parallel).
type FinalizeOptions struct {
	// NumTokens, when set (calculate_per_token_loss), is the global token
	// count, already all-reduced by the caller: the gradients are scaled by
	// 1/max(NumTokens, 1).
	NumTokens *int64
	// TP is the tensor-parallel group; nil or size 1 skips the TP step.
	TP comm.Group
	// SequenceParallel is the model config's sequence_parallel: the
	// gradients of parameters marked SequenceParallel (layer norms, and
	// row-parallel biases) are partial sums over the TP ranks' sequence
	// shards, and are all-reduced over TP.
	SequenceParallel bool
	// Embedding is the embedding group (the first and last pipeline stages)
	// and EmbeddingParams the shared word-embedding weights this rank holds
	// in it (the first chunk's on the first stage, the last chunk's on the
	// last stage): their gradients are summed over the group, so both
	// copies of the tied weight get the gradient of the whole model. Nil or
	// a group of one skips the group's step. A rank that holds both copies
	// (two EmbeddingParams: the V placement puts the first and the last
	// stage on one rank) sums them first, as the group would.
	Embedding       comm.Group
	EmbeddingParams []*nn.Parameter
	// PosEmbedding is the position-embedding group (by default the first
	// stage alone, so a no-op) and PosEmbeddingParams the position
	// embeddings this rank holds in it: their gradients are summed over it.
	PosEmbedding       comm.Group
	PosEmbeddingParams []*nn.Parameter
	// ForceAllReduce makes the data-parallel reductions all-reduces even
	// under the distributed optimizer (the schedules' force_all_reduce).
	ForceAllReduce bool
	// Experts, when set, runs after the embedding steps: the place of the
	// expert-bias update and of any other expert-parameter reduction
	// (docs/SEMANTICS.md § finalize_model_grads, step 8). Expert buffers
	// themselves are DDPs of their own in chunks, reduced over their expert
	// data-parallel group in step 1.
	Experts func(ctx context.Context) error
}

// FinalizeModelGrads is Megatron's finalize_model_grads for the dimensions
// (docs/SEMANTICS.md § finalize_model_grads): finish every chunk's
// data-parallel gradient synchronisation (step 1); over the tensor-parallel
// group, average the gradients of parameters marked AverageGradientsAcrossTP
// and, under sequence parallelism, sum those of SequenceParallel parameters,
// each coalesced into one buffer (step 4); sum the shared word embedding's
// gradient over the embedding group (step 6) and the position embedding's
// over its group (step 7); run the expert hook (step 8); scale by the global
// token count when o.NumTokens is set (step 10; the caller has broadcast it
// over the pipeline and summed it over dp·cp). Steps 2, 3 and 5 concern
// models and axes gotron does not have. Afterwards every tensor-parallel rank
// holds identical gradients for the parameters it replicates, and the first
// and last pipeline stages identical gradients for the tied embedding.
func FinalizeModelGrads(ctx context.Context, chunks []Wrapper, o FinalizeOptions) error {
	for _, d := range chunks {
		if err := d.FinishGradSync(ctx, o.ForceAllReduce); err != nil {
			return err
		}
	}
	if o.TP != nil && o.TP.Size() > 1 {
		if err := reduceOverTP(ctx, chunks, o.TP, o.SequenceParallel); err != nil {
			return err
		}
	}
	if err := sumEmbeddings(ctx, gradsOf(chunks, o.EmbeddingParams), o.Embedding); err != nil {
		return err
	}
	if o.PosEmbedding != nil && o.PosEmbedding.Size() > 1 {
		if err := sumGrads(ctx, gradsOf(chunks, o.PosEmbeddingParams), o.PosEmbedding, "the position embedding"); err != nil {
			return err
		}
	}
	if o.Experts != nil {
		if err := o.Experts(ctx); err != nil {
			return err
		}
	}
	if o.NumTokens != nil {
		s := float32(1 / float64(max(*o.NumTokens, 1)))
		for _, d := range chunks {
			d.ScaleGradients(s)
		}
	}
	return nil
}

// reduceOverTP averages the gradients of AverageGradientsAcrossTP
// parameters over tp and sums those of SumGradientsAcrossTP ones and, when
// sp, of SequenceParallel ones, each kind in one coalesced all-reduce.
func reduceOverTP(ctx context.Context, chunks []Wrapper, tp comm.Group, sp bool) error {
	var avg, sum []*tensor.Tensor
	for _, d := range chunks {
		for _, p := range d.Parameters() {
			g := d.GradOf(p)
			switch {
			case g == nil:
			case p.AverageGradientsAcrossTP:
				avg = append(avg, g)
			case sp && p.SequenceParallel, p.SumGradientsAcrossTP:
				sum = append(sum, g)
			}
		}
	}
	if len(avg) > 0 {
		if err := reduceGrads(ctx, avg, tp, comm.Avg, fmt.Sprintf("the tensor-parallel averaged gradients (%d parameters)", len(avg))); err != nil {
			return err
		}
	}
	if len(sum) > 0 {
		return sumGrads(ctx, sum, tp, fmt.Sprintf("the sequence-parallel gradients (%d parameters)", len(sum)))
	}
	return nil
}

// sumGrads sums the gradients gs over g in one coalesced all-reduce,
// unless there are none (the ranks of g hold the same layout, so then
// none of them has any); what names them in errors.
func sumGrads(ctx context.Context, gs []*tensor.Tensor, g comm.Group, what string) error {
	if len(gs) == 0 {
		return nil
	}
	return reduceGrads(ctx, gs, g, comm.Sum, what)
}

// gradsOf returns the gradients of ps as the wrapper holding each keeps
// them (Wrapper.GradOf), leaving out those it keeps none of on this rank;
// a parameter in no wrapper gives its Grad.
func gradsOf(chunks []Wrapper, ps []*nn.Parameter) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, p := range ps {
		g := p.Grad
		for _, d := range chunks {
			if slices.Contains(d.Parameters(), p) {
				g = d.GradOf(p)
				break
			}
		}
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}

// sumEmbeddings gives every copy of the word embedding, gs on this rank,
// the sum of all copies' gradients over the embedding group g: the
// copies on this rank summed first (sumCopies), then the first of them
// all-reduced over g and copied to the others, so that every rank of g
// sends one tensor however many copies it holds.
func sumEmbeddings(ctx context.Context, gs []*tensor.Tensor, g comm.Group) error {
	if err := sumCopies(gs); err != nil {
		return err
	}
	if g == nil || g.Size() == 1 || len(gs) == 0 {
		return nil
	}
	if err := sumGrads(ctx, gs[:1], g, "the shared word embedding"); err != nil {
		return err
	}
	for _, c := range gs[1:] {
		c.CopyFrom(gs[0])
	}
	return nil
}

// sumCopies gives the gradients gs of a weight held several times on this
// rank (the tied embedding under the V placement, or beside an MTP
// stage's copy) their sum, with comm's reduction kernel in the order of gs
// (chunk order), so that for two copies the result is the embedding
// group's all-reduce over two ranks, bit for bit. Fewer than two: nothing
// to sum (none is a rank keeping no copy's gradient, a shard elsewhere).
func sumCopies(gs []*tensor.Tensor) error {
	if len(gs) < 2 {
		return nil
	}
	bufs := make([]comm.Buffer, len(gs))
	for i, g := range gs {
		c := g.Contiguous()
		if c != g || c.DType() != gs[0].DType() || c.Len() != gs[0].Len() {
			return fmt.Errorf("dp: the %d copies of the shared word embedding on this rank keep gradients of %v %v and %v %v: they must be alike and contiguous to be summed", len(gs), gs[0].DType(), gs[0].Shape(), g.DType(), g.Shape())
		}
		bufs[i] = bufferOf(c)
	}
	comm.Reduce(comm.Sum, bufs, bufs)
	return nil
}

// bufferOf is the comm buffer over a contiguous tensor's elements.
func bufferOf(t *tensor.Tensor) comm.Buffer {
	switch t.DType() {
	case tensor.BFloat16:
		return comm.BF16(t.Bits())
	case tensor.Float16:
		return comm.F16(t.Bits())
	}
	return comm.F32(t.Data())
}

// reduceGrads reduces the gradients gs over g with op in one coalesced
// all-reduce, in the gradients' type (coalescedDType): a 16-bit reduction
// accumulates in float32 in rank order and rounds once, and a 16-bit
// gradient coalesced into a float32 buffer is widened into it and rounded
// back from the result.
func reduceGrads(ctx context.Context, gs []*tensor.Tensor, g comm.Group, op comm.ReduceOp, what string) error {
	n := 0
	for _, x := range gs {
		n += x.Len()
	}
	buf := newData(coalescedDType(gs), n)
	off := 0
	for _, x := range gs {
		m := x.Len()
		viewOf(buf, off, off+m, []int{m}).CopyFrom(x.View(m))
		off += m
	}
	if err := g.AllReduce(ctx, buf, op); err != nil {
		return fmt.Errorf("dp: all-reduce of %s over %s: %w", what, g.Name(), err)
	}
	off = 0
	for _, x := range gs {
		m := x.Len()
		x.View(m).CopyFrom(viewOf(buf, off, off+m, []int{m}))
		off += m
	}
	return nil
}

// coalescedDType is the type of the buffer the gradients gs are
// coalesced into: their common type, or float32 when they differ (16-bit
// gradients beside float32 local ones,
// param_name_patterns_for_fp32_local_accumulation), as torch's
// _flatten_dense_tensors promotes mixed types.
func coalescedDType(gs []*tensor.Tensor) tensor.DType {
	if len(gs) == 0 {
		return tensor.Float32
	}
	d := gs[0].DType()
	for _, x := range gs[1:] {
		if x.DType() != d {
			return tensor.Float32
		}
	}
	return d
}
