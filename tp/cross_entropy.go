package tp

import (
	"fmt"
	"math"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// CrossEntropyOptions configures VocabParallelCrossEntropy.
type CrossEntropyOptions struct {
	// LabelSmoothing is α, 0 ≤ α < 1 (0: none). gotron smooths with the
	// global formula (DECISIONS.md): s = α·V/(V−1) over the real global
	// vocabulary V, the same for every tensor-parallel size.
	LabelSmoothing float32
	// Group is the tensor-parallel group the vocabulary is split over; nil
	// means one rank.
	Group comm.Group
	// VocabSize is the real (unpadded) global vocabulary size V. Global
	// columns ≥ VocabSize are padding (make_vocab_size_divisible_by × tp):
	// they take no probability, are left out of the smoothing mean, and get
	// an exact zero gradient, so a padded model has the loss and gradients
	// of the unpadded one. 0 means every column is real (V = tp·V/tp).
	VocabSize int
}

// VocabParallelCrossEntropy returns the per-token cross-entropy loss [N] of
// logits split along the vocabulary (Megatron's
// vocab_parallel_cross_entropy, docs/SEMANTICS.md § Vocab-parallel cross
// entropy).
//
// Shapes: logits [s, b, V/tp] (any leading dims, flattened to N rows; the
// last dim is this rank's vocabulary slice: rank r holds the global columns
// [r·P, r·P+P) with P = V/tp); target [N] global token ids; the result [N].
//
// Forward, for row i with target t, over the real columns j < V only:
//
//	m     = max_j x_ij                          all-reduce MAX   (1)
//	x_t   = x_it on the rank owning t, else 0   all-reduce SUM   (2)
//	S     = Σ_j exp(x_ij − m)                   all-reduce SUM   (3)
//	lse   = m + log S
//	CE    = lse − x_t,  or log S for a masked target (the reference's
//	        predicted logit 0, i.e. z_t = 0)
//	loss  = CE                                  (α = 0)
//	loss  = (1−s)·CE − s·mean_V(log p),  s = α·V/(V−1),
//	        Σ_j log p_ij = Σ_j x_ij − V·lse     all-reduce SUM   (4)
//
// so exactly 3 all-reduces without smoothing and 4 with (over Group; none
// on one rank, none in backward). The predicted-logit all-reduce (2) is
// issued asynchronously and overlaps the exponentials. Targets outside
// [0, V) (negative, beyond the vocabulary, or a padding id) are masked on
// every rank as the reference masks them: there is no ignore index, and
// callers drop such tokens through the loss mask.
//
// Backward, with dy [N] the loss gradient and p = exp(x − lse) the global
// softmax on this rank's columns:
//
//	dx_ij = p_ij·dy_i − (1−s)·[j = t]·dy_i − (s/V)·dy_i   (real columns)
//	dx_ij = 0                                            (padding columns)
//
// Memory: only the logits, the per-row lse (float64) and the ids are kept;
// the softmax is recomputed in backward, which overwrites the saved logits
// with their gradient in place (as nn.CrossEntropy does), so the logits
// must not be read after backward. Row loops run on the tape's workers.
//
// Precision: the local sums are float64; the all-reduced m, x_t, S and
// Σ log p travel as float32. Backward rescales the exponentials by
// exp(lse32 − lse) so the probabilities do not carry lse's float32
// rounding; each still carries the float32 rounding of x − lse, as
// nn.CrossEntropy's do. On one rank without smoothing, padding or masked
// targets it is nn.CrossEntropy, so its loss and gradient are bitwise
// those of nn.CrossEntropy; otherwise the loss and gradient agree
// with a float64 computation to about 1e-6 relative, whatever the TP size.
//
// Errors (α outside [0, 1), a VocabSize larger than the columns, α > 0 with
// V < 2, a target count that does not match the rows, a failed collective)
// are recorded on the tape; the returned Var then has no value. Every rank
// sees the same targets and options, so every rank fails alike.
func VocabParallelCrossEntropy(t *autograd.Tape, logits *autograd.Var, target []int32, opts CrossEntropyOptions) *autograd.Var {
	if x := logits.Value; t.Err() == nil && x != nil && worldSize(opts.Group) == 1 && opts.LabelSmoothing == 0 &&
		x.Rank() >= 1 && x.Dim(-1) > 0 && len(target)*x.Dim(-1) == x.Len() && (opts.VocabSize == 0 || opts.VocabSize == x.Dim(-1)) && targetsInRange(target, x.Dim(-1)) {
		// The whole vocabulary on one rank, nothing to smooth, pad or mask:
		// the plain cross entropy.
		return nn.CrossEntropy(t, logits, target)
	}
	return autograd.Apply(t, &vocabParallelCEFn{target: target, opts: opts}, logits)
}

// vocabParallelCEFn is the Function behind VocabParallelCrossEntropy.
type vocabParallelCEFn struct {
	target []int32
	opts   CrossEntropyOptions
}

// ceState is what backward needs besides the saved logits.
type ceState struct {
	lse    []float64 // per-row global log-sum-exp
	start  int       // global index of this rank's first column
	real   int       // real (non-padding) columns of this rank, a prefix
	vocab  int       // real global vocabulary V
	smooth float64   // s = α·V/(V−1), 0 without smoothing
}

// Forward implements autograd.Function.
func (f *vocabParallelCEFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	g := f.opts.Group
	ws, rank := worldSize(g), rankOf(g)
	x := in[0]
	if x.Rank() < 1 || x.Dim(-1) == 0 {
		return nil, fmt.Errorf("tp: vocab parallel cross entropy: logits have shape %v; want [..., V/tp] with V/tp > 0", x.Shape())
	}
	x = x.Contiguous()
	cols := x.Dim(-1)
	rows := x.Len() / cols
	if rows != len(f.target) {
		return nil, fmt.Errorf("tp: vocab parallel cross entropy: logits %v hold %d rows but %d targets were given; pass one target per row", x.Shape(), rows, len(f.target))
	}
	alpha := float64(f.opts.LabelSmoothing)
	if !(alpha >= 0 && alpha < 1) {
		return nil, fmt.Errorf("tp: vocab parallel cross entropy: label smoothing %v is outside [0, 1); use 0 for none", f.opts.LabelSmoothing)
	}
	padded := cols * ws
	vocab := f.opts.VocabSize
	if vocab == 0 {
		vocab = padded
	}
	if vocab < 0 || vocab > padded {
		return nil, fmt.Errorf("tp: vocab parallel cross entropy: VocabSize %d is outside [1, %d] (%d columns on each of %d ranks); give the real vocabulary size, or 0 when no column is padding", f.opts.VocabSize, padded, cols, ws)
	}
	if alpha > 0 && vocab < 2 {
		return nil, fmt.Errorf("tp: vocab parallel cross entropy: label smoothing needs a vocabulary of at least 2 (V = %d makes α·V/(V−1) undefined)", vocab)
	}
	st := &ceState{start: rank * cols, vocab: vocab}
	st.real = min(max(vocab-st.start, 0), cols)
	if alpha > 0 {
		st.smooth = alpha * float64(vocab) / float64(vocab-1)
	}
	loss := tensor.New(rows)
	if err := f.forward(c, st, x, loss); err != nil {
		return nil, err
	}
	if c.Recording() {
		c.Save(x)
		c.State = st
	}
	return loss, nil
}

// targetsInRange reports whether every target is in [0, v).
func targetsInRange(target []int32, v int) bool {
	for _, id := range target {
		if id < 0 || int(id) >= v {
			return false
		}
	}
	return true
}

// localTarget returns the column of target id on this rank, or −1 when
// another rank owns it or it is masked (outside the real vocabulary).
func (st *ceState) localTarget(id int32) int {
	j := int(id) - st.start
	if id < 0 || j < 0 || j >= st.real {
		return -1
	}
	return j
}

// masked reports whether target id is outside the real vocabulary.
func (st *ceState) masked(id int32) bool { return id < 0 || int(id) >= st.vocab }

// forward is the vocabulary-parallel algorithm (see VocabParallelCrossEntropy).
func (f *vocabParallelCEFn) forward(c *autograd.Ctx, st *ceState, x, loss *tensor.Tensor) error {
	ctx := c.Context()
	g := f.opts.Group
	ws := worldSize(g)
	cols, rows, nReal := x.Dim(-1), len(f.target), st.real
	xd := x.Data()
	workers := c.Tape().RowWorkers(rows, cols)
	smoothing := st.smooth > 0

	// Pass 1: the local maximum, the predicted logit and (for smoothing)
	// the local Σ x over the real columns.
	m := make([]float32, rows)
	pred := make([]float32, rows)
	var sumX []float64
	if smoothing {
		sumX = make([]float64, rows)
	}
	kernels.ParallelFor(rows, workers, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := xd[r*cols : r*cols+nReal]
			if smoothing {
				m[r], sumX[r] = rowMaxSum(row)
			} else {
				m[r] = rowMax(row)
			}
			if j := st.localTarget(f.target[r]); j >= 0 {
				pred[r] = row[j]
			}
		}
	})
	if ws > 1 {
		if err := g.AllReduce(ctx, comm.F32(m), comm.Max); err != nil {
			return fmt.Errorf("tp: vocab parallel cross entropy: all-reduce (max) of the logits' maximum over %s: %w", groupName(g), err)
		}
	}
	var predWork comm.Work
	if ws > 1 {
		var err error
		if predWork, err = g.AllReduceAsync(ctx, comm.F32(pred), comm.Sum); err != nil {
			return fmt.Errorf("tp: vocab parallel cross entropy: all-reduce (sum) of the predicted logits over %s: %w", groupName(g), err)
		}
	}

	// Pass 2: S = Σ exp(x − m) over the real columns, in float64.
	sum := make([]float64, rows)
	kernels.ParallelFor(rows, workers, func(lo, hi int) {
		if nReal == 0 {
			return // no real column here: S stays 0
		}
		e := make([]float32, nReal)
		for r := lo; r < hi; r++ {
			kernels.SoftmaxWithLSE(e, xd[r*cols:r*cols+nReal], m[r:r+1], nil, 1, nReal)
			sum[r] = sumFloat64(e)
		}
	})
	if predWork != nil {
		if err := predWork.Wait(ctx); err != nil {
			return fmt.Errorf("tp: vocab parallel cross entropy: all-reduce (sum) of the predicted logits over %s: %w", groupName(g), err)
		}
	}
	if err := allReduceFloat64(c, g, sum, "the sum of exponentials"); err != nil {
		return err
	}

	st.lse = make([]float64, rows)
	ce := make([]float64, rows)
	for r := range rows {
		logS := math.Log(sum[r])
		st.lse[r] = float64(m[r]) + logS
		if st.masked(f.target[r]) {
			ce[r] = logS
		} else {
			ce[r] = st.lse[r] - float64(pred[r])
		}
	}
	ld := loss.Data()
	if !smoothing {
		for r, v := range ce {
			ld[r] = float32(v)
		}
		return nil
	}
	// Σ_j log p_ij = Σ_j x_ij − nReal·lse over this rank's real columns.
	logP := sumX
	for r := range logP {
		logP[r] -= float64(nReal) * st.lse[r]
	}
	if err := allReduceFloat64(c, g, logP, "the sum of log-probabilities (label smoothing)"); err != nil {
		return err
	}
	s, v := st.smooth, float64(st.vocab)
	for r := range ld {
		ld[r] = float32((1-s)*ce[r] - s*logP[r]/v)
	}
	return nil
}

// allReduceFloat64 sums vals over g. The values travel as float32 (comm
// has no float64 buffer); on one rank they keep their float64 precision.
func allReduceFloat64(c *autograd.Ctx, g comm.Group, vals []float64, what string) error {
	if worldSize(g) == 1 {
		return nil
	}
	buf := make([]float32, len(vals))
	for i, v := range vals {
		buf[i] = float32(v)
	}
	if err := g.AllReduce(c.Context(), comm.F32(buf), comm.Sum); err != nil {
		return fmt.Errorf("tp: vocab parallel cross entropy: all-reduce (sum) of %s over %s: %w", what, groupName(g), err)
	}
	for i, v := range buf {
		vals[i] = float64(v)
	}
	return nil
}

// rowMax returns max_j x[j] (−Inf for an empty x; NaN if any x[j] is NaN).
func rowMax(x []float32) float32 {
	m0, m1, m2, m3 := float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		m0, m1, m2, m3 = max(m0, v[0]), max(m1, v[1]), max(m2, v[2]), max(m3, v[3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}

// rowMaxSum returns max_j x[j] and Σ_j x[j] (in float64) in one pass.
func rowMaxSum(x []float32) (float32, float64) {
	m0, m1 := float32(math.Inf(-1)), float32(math.Inf(-1))
	var s0, s1 float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		v := x[i : i+2 : i+2]
		m0, m1 = max(m0, v[0]), max(m1, v[1])
		s0 += float64(v[0])
		s1 += float64(v[1])
	}
	if i < len(x) {
		m0 = max(m0, x[i])
		s0 += float64(x[i])
	}
	return max(m0, m1), s0 + s1
}

// sumFloat64 returns Σ x[j] accumulated in float64.
func sumFloat64(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0])
		s1 += float64(v[1])
		s2 += float64(v[2])
		s3 += float64(v[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// Backward implements autograd.Function. It overwrites the saved logits
// with their gradient and returns them.
func (f *vocabParallelCEFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	st := c.State.(*ceState)
	cols := x.Dim(-1)
	rows := len(f.target)
	xd, dd := x.Data(), dy.Data()
	workers := c.Tape().RowWorkers(rows, cols)
	nReal, s, v := st.real, st.smooth, float64(st.vocab)
	kernels.ParallelFor(rows, workers, func(lo, hi int) {
		var lse32, mul [1]float32
		for r := lo; r < hi; r++ {
			row := xd[r*cols : r*cols+cols]
			d := float64(dd[r])
			if d == 0 || nReal == 0 {
				clear(row)
				continue
			}
			lse := st.lse[r]
			j := st.localTarget(f.target[r])
			var xt float32
			if j >= 0 {
				xt = row[j]
			}
			// p·dy from the float32 lse, rescaled by exp(lse32 − lse) so
			// the probabilities do not carry lse's rounding.
			lse32[0] = float32(lse)
			mul[0] = float32(d * math.Exp(float64(lse32[0])-lse))
			live := row[:nReal]
			kernels.SoftmaxWithLSE(live, live, lse32[:], mul[:], 1, nReal)
			if s > 0 {
				sub := float32(s / v * d)
				for k := range live {
					live[k] -= sub
				}
			}
			if j >= 0 {
				p := math.Exp(float64(xt) - lse)
				live[j] = float32((p - (1 - s) - s/v) * d)
			}
			clear(row[nReal:])
		}
	})
	return []*tensor.Tensor{x}, nil
}

// StateBytes reports the per-row log-sum-exp the loss keeps for backward
// (autograd's activation-memory accounting).
func (st *ceState) StateBytes() int64 { return 8 * int64(cap(st.lse)) }
