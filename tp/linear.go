package tp

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// LinearOptions configures LinearWithGradAccumulationAndAsyncAllreduce
// (docs/SEMANTICS.md § Column- and row-parallel linear layers).
type LinearOptions struct {
	// AllreduceDgrad all-reduces (SUM) the input gradient over Group in
	// backward, while the weight-gradient GEMM runs. Column-parallel
	// layers set it when tp > 1 without sequence parallelism.
	AllreduceDgrad bool
	// SequenceParallel all-gathers the input along dim 0 over Group in
	// forward ([s/tp, b, in] → [s, b, in]) and reduce-scatters the input
	// gradient along dim 0 in backward, while the weight-gradient GEMM
	// runs. It cannot be combined with AllreduceDgrad. It has no effect on a
	// group of one rank.
	SequenceParallel bool
	// Group is the tensor-parallel group of the collectives; nil means a
	// group of one rank (no communication).
	Group comm.Group
	// FrozenWeight computes only the input gradient: no weight or bias
	// gradient, and the input is not kept for backward (Megatron's
	// linear_with_frozen_weight). The weight need not be a leaf then.
	FrozenWeight bool
	// SerialComm waits for every collective right after issuing it, so
	// nothing overlaps the GEMMs. The results are the same; it exists to
	// measure what the overlap saves (see BenchmarkLinearBackward).
	SerialComm bool
	// UnfusedWeightGrad computes dW into a fresh product added to the
	// gradient afterwards (Megatron without gradient_accumulation_fusion,
	// nn.AccumulateWeightGrad); the zero value fuses, as step 4 says.
	UnfusedWeightGrad bool
}

// LinearWithGradAccumulationAndAsyncAllreduce returns y = X·Wᵀ (+ b), the
// autograd core of the tensor-parallel linears (Megatron's
// linear_with_grad_accumulation_and_async_allreduce, docs/SEMANTICS.md
// § Column- and row-parallel linear layers). Shapes, with tp the size of
// opts.Group:
//
//	x [..., in], or [s/tp, b, in] with SequenceParallel (X is then the
//	all-gather of x along dim 0, [s, b, in]); weight [out, in]; bias [out]
//	or nil; y [..., out] (with SequenceParallel [s, b, out]).
//
// Backward, with dY flattened to [rows, out] and X to [rows, in]:
//
//  1. with SequenceParallel, the all-gather of x that rebuilds X for the
//     weight gradient is started (only the local shard was kept);
//  2. dX = dY·W;
//  3. with AllreduceDgrad, an all-reduce of dX is started; with
//     SequenceParallel, a reduce-scatter of dX along dim 0 into [s/tp, b, in];
//  4. while it runs, dW += dYᵀ·X and db += Σ_rows dY are accumulated straight
//     into the parameters' Grad (nn.GradBuffer): the gradient-accumulation
//     fusion into main_grad, so weight and bias must be leaf parameters;
//  5. the collective is waited for and dX returned.
//
// The collectives are issued and waited for by the calling goroutine, in
// the same order on every rank, so the group's ordering rule holds. The
// arithmetic is that of nn.Linear, so on one rank the output and every
// gradient are bitwise those of nn.Linear.
//
// Mixed precision: when the weight is bfloat16 or float16, x is rounded to
// its type once in forward (nn.GemmInput) — under SequenceParallel the local
// shard is rounded before the all-gather, which then carries 16-bit
// elements, as does backward's re-gather — and the 16-bit x (the local
// shard under SequenceParallel) is what is kept for backward. y and dX are
// float32 (GEMMs accumulate in float32; a 16-bit bias is widened), and the
// dX all-reduce or reduce-scatter is float32. In backward dY is rounded to
// the weight's type once and used for both GEMMs; dW and db (the column sum
// of the float32 dY) are accumulated by nn.AccumulateGrad into a float32 or
// a 16-bit Grad. These are nn.Linear's rules, so on one rank the results
// are still bitwise nn.Linear's.
//
// With opts.FrozenWeight (see LinearWithFrozenWeight) only dX is computed.
// Errors (shapes, a non-leaf weight, AllreduceDgrad with SequenceParallel, a
// failed collective) are recorded on the tape; the returned Var then has
// no value.
func LinearWithGradAccumulationAndAsyncAllreduce(t *autograd.Tape, x, weight, bias *autograd.Var, opts LinearOptions) *autograd.Var {
	f := &asyncLinearFn{w: weight, b: bias, opts: opts}
	if bias == nil {
		return autograd.Apply(t, f, x, weight)
	}
	return autograd.Apply(t, f, x, weight, bias)
}

// LinearWithFrozenWeight is LinearWithGradAccumulationAndAsyncAllreduce
// with opts.FrozenWeight set: y = X·Wᵀ (+ b) forward; backward computes only
// dX = dY·W (all-reduced with AllreduceDgrad, reduce-scattered along dim 0
// with SequenceParallel) and no weight or bias gradient, as Megatron's
// linear_with_frozen_weight does.
func LinearWithFrozenWeight(t *autograd.Tape, x, weight, bias *autograd.Var, opts LinearOptions) *autograd.Var {
	opts.FrozenWeight = true
	return LinearWithGradAccumulationAndAsyncAllreduce(t, x, weight, bias, opts)
}

// asyncLinearFn is the Function behind
// LinearWithGradAccumulationAndAsyncAllreduce; inputs (x, W[, b]).
type asyncLinearFn struct {
	w, b *autograd.Var
	opts LinearOptions
}

// name names the layer in errors.
func (f *asyncLinearFn) name() string {
	if f.w != nil && f.w.Name != "" {
		return fmt.Sprintf("linear %q", f.w.Name)
	}
	return "linear"
}

// sp reports whether sequence parallelism is in effect.
func (f *asyncLinearFn) sp() bool { return f.opts.SequenceParallel && worldSize(f.opts.Group) > 1 }

// Forward implements autograd.Function.
func (f *asyncLinearFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, w := in[0], in[1]
	if f.opts.AllreduceDgrad && f.opts.SequenceParallel {
		return nil, fmt.Errorf("tp: %s: AllreduceDgrad and SequenceParallel cannot be enabled at the same time; under sequence parallelism the input gradient is reduce-scattered instead", f.name())
	}
	if !f.opts.FrozenWeight {
		if err := errors.Join(nn.CheckParam(f.w, "linear weight"), nn.CheckParam(f.b, "linear bias")); err != nil {
			return nil, fmt.Errorf("tp: %s: %w (use LinearWithFrozenWeight for a weight that needs no gradient)", f.name(), err)
		}
	}
	if w.Rank() != 2 {
		return nil, fmt.Errorf("tp: %s: weight has shape %v, want [out, in]", f.name(), w.Shape())
	}
	out, inF := w.Dim(0), w.Dim(1)
	if x.Rank() < 1 || x.Dim(-1) != inF {
		return nil, fmt.Errorf("tp: %s: input has shape %v, its last dimension must be the weight's in = %d (weight [%d, %d])", f.name(), x.Shape(), inF, out, inF)
	}
	if f.b != nil && (in[2].Rank() != 1 || in[2].Dim(0) != out) {
		return nil, fmt.Errorf("tp: %s: bias has shape %v, want [%d]", f.name(), in[2].Shape(), out)
	}
	// A 16-bit weight: round x (the local shard) once; it is gathered, used
	// and kept in 16 bits.
	x = nn.GemmInput(c.Tape().Workers(), x.Contiguous(), w)
	total := x
	if f.sp() {
		if x.Rank() < 2 {
			return nil, fmt.Errorf("tp: %s: sequence parallel input has shape %v, want [s/tp, ..., in]", f.name(), x.Shape())
		}
		var err error
		if total, err = gatherFirst(c.Context(), f.opts.Group, x, f.name()+" sequence-parallel input"); err != nil {
			return nil, err
		}
	}
	var b *tensor.Tensor
	if f.b != nil {
		b = in[2]
	}
	y := nn.LinearForward(c.Tape().Workers(), total, w, b)
	if c.Recording() {
		if f.opts.FrozenWeight {
			// Only dX = dY·W is needed: keep the weight and the input's shape.
			c.Save(w)
			c.State = x.Shape()
		} else {
			// Under sequence parallelism only the local shard is kept;
			// backward gathers X again.
			c.Save(x, w)
		}
	}
	return y, nil
}

// Backward implements autograd.Function.
func (f *asyncLinearFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	ctx := c.Context()
	g := f.opts.Group
	sp := f.sp()
	var x, w *tensor.Tensor
	var xShape []int
	if f.opts.FrozenWeight {
		w = c.Saved()[0]
		xShape = c.State.([]int)
	} else {
		x, w = c.Saved()[0], c.Saved()[1]
		xShape = x.Shape()
	}
	out, inF := w.Dim(0), w.Dim(1)
	rows := leadingRows(dy.Shape())
	dy2 := dy.View(rows, out)
	needX := c.NeedsGrad(0)
	needW := !f.opts.FrozenWeight && c.NeedsGrad(1)
	needB := !f.opts.FrozenWeight && f.b != nil && c.NeedsGrad(2)
	grads := make([]*tensor.Tensor, 2, 3)
	if f.b != nil {
		grads = append(grads, nil)
	}

	// 1. Under SP, start re-gathering X for the weight gradient before the
	// dX GEMM so the two overlap.
	totalShape := append([]int(nil), xShape...)
	if sp {
		totalShape[0] *= g.Size()
	}
	total := x
	var gather comm.Work
	if sp && needW {
		total = tensor.EmptyOf(x.DType(), totalShape...) // x's dtype: 16 bits for a 16-bit weight
		var err error
		if gather, err = g.AllGatherAsync(ctx, bufferOf(total), bufferOf(x)); err != nil {
			return nil, fmt.Errorf("tp: %s backward: all-gather of the sequence-parallel input over %s: %w", f.name(), groupName(g), err)
		}
		if f.opts.SerialComm {
			if err := f.wait(ctx, gather, "all-gather of the sequence-parallel input"); err != nil {
				return nil, err
			}
			gather = nil
		}
	}

	// 2. dX = dY·W, with dY rounded once to a 16-bit weight's type (and
	// used again for dW).
	workers := c.Tape().Workers()
	var dyg *tensor.Tensor
	if needX || needW {
		dyg = nn.GemmInput(workers, dy2, w)
	}
	var dx *tensor.Tensor
	if needX {
		dx = tensor.Empty(totalShape...)
		tensor.GemmParallel(workers, false, false, 1, dyg, w, 0, dx.View(rows, inF))
	}
	if gather != nil {
		if err := f.wait(ctx, gather, "all-gather of the sequence-parallel input"); err != nil {
			return nil, err
		}
	}

	// 3. Start the input-gradient collective.
	var pending comm.Work
	var what string
	if needX {
		grads[0] = dx
		switch {
		case sp:
			sub := tensor.Empty(xShape...)
			what = "reduce-scatter of the input gradient"
			var err error
			if pending, err = g.ReduceScatterAsync(ctx, comm.F32(sub.Data()), comm.F32(dx.Data()), comm.Sum); err != nil {
				return nil, fmt.Errorf("tp: %s backward: %s over %s: %w", f.name(), what, groupName(g), err)
			}
			grads[0] = sub
		case f.opts.AllreduceDgrad && worldSize(g) > 1:
			what = "all-reduce of the input gradient"
			var err error
			if pending, err = g.AllReduceAsync(ctx, comm.F32(dx.Data()), comm.Sum); err != nil {
				return nil, fmt.Errorf("tp: %s backward: %s over %s: %w", f.name(), what, groupName(g), err)
			}
		}
		if pending != nil && f.opts.SerialComm {
			if err := f.wait(ctx, pending, what); err != nil {
				return nil, err
			}
			pending = nil
		}
	}

	// 4. While it runs: dW += dYᵀ·X, db += Σ_rows dY, into the parameters'
	// gradients.
	if needW {
		nn.AccumulateWeightGrad(c, f.w, !f.opts.UnfusedWeightGrad, func(dst []float32) {
			tensor.GemmParallel(workers, true, false, 1, dyg, total.View(rows, inF), 1, tensor.FromSlice(dst, out, inF))
		})
	}
	if needB {
		nn.AccumulateGrad(c, f.b, func(dst []float32) { kernels.ColumnSumInto(dst, dy.Data(), rows, out) })
	}

	// 5. Wait for the input gradient.
	if pending != nil {
		if err := f.wait(ctx, pending, what); err != nil {
			return nil, err
		}
	}
	return grads, nil
}

// wait waits for w and wraps its error.
func (f *asyncLinearFn) wait(ctx context.Context, w comm.Work, what string) error {
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("tp: %s backward: %s over %s: %w", f.name(), what, groupName(f.opts.Group), err)
	}
	return nil
}

// leadingRows returns the product of all but the last dimension: the rows
// of a [..., n] tensor viewed as a matrix.
func leadingRows(shape []int) int {
	rows := 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	return rows
}
