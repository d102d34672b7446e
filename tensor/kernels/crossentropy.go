package kernels

import (
	"fmt"
	"math"
)

// LogSumExpRows sets lse[r] = log Σ_j exp(x[r,j]) for x [rows, cols], lse [rows], stably:
// with M the row's maximum, lse = M + log Σ exp(x − M). The sum is accumulated in float64
// and the result rounded once. −Inf entries contribute nothing (a row of −Inf gives −Inf).
// On a vocab-parallel split each rank's lse of its columns combines into the global one as
// M' + log Σ_ranks exp(lse − M'), and [SoftmaxWithLSE] then gives each rank its columns of
// the softmax. lse must not overlap x. Panics on a length mismatch (a programmer bug).
func LogSumExpRows(lse, x []float32, rows, cols int) {
	const op = "LogSumExpRows"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "lse", len(lse), rows, "rows")
	for r := range lse {
		lse[r] = float32(rowLSE(x[r*cols : r*cols+cols]))
	}
}

// rowLSE returns log Σ exp(x) of one row in float64 (−Inf for an empty or all −Inf row).
func rowLSE(x []float32) float64 {
	m := maxScaled(x, 1)
	if math.IsInf(float64(m), 0) {
		if m > 0 {
			return math.Inf(1) // a +Inf logit
		}
		return math.Inf(-1)
	}
	return float64(m) + math.Log(sumExpAffine(x, 1, m))
}

// CrossEntropyForward computes the per-row cross entropy of logits [rows, vocab] against
// labels [rows] (torch.nn.functional.cross_entropy with reduction='none'):
//
//	lse[r]  = log Σ_j exp(logits[r,j])
//	loss[r] = lse[r] − logits[r, labels[r]]
//
// lse [rows] is saved for [CrossEntropyBackward]. The loss is formed in float64 from the
// float64 log-sum-exp before rounding, so a small loss keeps its relative precision. −Inf
// logits (padded vocabulary entries) take no probability and get a zero gradient.
//
// Every label must be in [0, vocab): there is no ignore index; the loss mask is applied by
// callers through dloss and the loss reduction. (A vocab-parallel split combines
// [LogSumExpRows] and [SoftmaxWithLSE] instead.) loss and lse must not overlap logits. A bad
// label or a length mismatch panics (programmer bugs: labels are validated where data is
// read).
func CrossEntropyForward(loss, lse, logits []float32, labels []int32, rows, vocab int) {
	const op = "CrossEntropyForward"
	needShape(op, rows, vocab)
	needLen(op, "logits", len(logits), rows*vocab, "rows·vocab")
	needLen(op, "labels", len(labels), rows, "rows")
	needLen(op, "loss", len(loss), rows, "rows")
	needLen(op, "lse", len(lse), rows, "rows")
	labels, loss = labels[:len(lse)], loss[:len(lse)]
	for r := range lse {
		row := logits[r*vocab : r*vocab+vocab]
		l := rowLSE(row)
		lse[r] = float32(l)
		t := labels[r]
		checkLabel(op, r, t, vocab)
		loss[r] = float32(l - float64(row[t]))
	}
}

// CrossEntropyBackward is the gradient of [CrossEntropyForward] with respect to the logits:
//
//	dlogits[r,j] = (softmax(logits[r])[j] − [j = labels[r]]) · dloss[r]
//
// The saved lse is the stabilizing shift: e_j = exp(logits[r,j] − lse[r]) and the softmax is
// e_j/Σe with Σe accumulated in float64 (≈ 1), so the probabilities do not carry lse's float32
// rounding. Then dlogits[r,j] = e_j·(dloss[r]/Σe), and the label's entry is
// (e_t/Σe − 1)·dloss[r]. A row with dloss[r] = 0 (a masked token) is written as zeros without
// evaluating exponentials. Shapes: dlogits, logits [rows, vocab]; lse, labels, dloss [rows].
//
// Aliasing: dlogits may alias logits exactly (the gradient overwrites the logits in place).
// Panics on a label ≥ vocab or a length mismatch (programmer bugs).
func CrossEntropyBackward(dlogits, logits, lse []float32, labels []int32, dloss []float32, rows, vocab int) {
	const op = "CrossEntropyBackward"
	needShape(op, rows, vocab)
	needLen(op, "logits", len(logits), rows*vocab, "rows·vocab")
	needLen(op, "dlogits", len(dlogits), rows*vocab, "rows·vocab")
	needLen(op, "lse", len(lse), rows, "rows")
	needLen(op, "labels", len(labels), rows, "rows")
	needLen(op, "dloss", len(dloss), rows, "rows")
	labels, dloss = labels[:len(lse)], dloss[:len(lse)]
	for r := range lse {
		row := logits[r*vocab : r*vocab+vocab]
		drow := dlogits[r*vocab : r*vocab+vocab]
		d := dloss[r]
		t := labels[r]
		checkLabel(op, r, t, vocab)
		if d == 0 {
			clear(drow)
			continue
		}
		// e_j = exp(x_j − lse) sums to 1 up to lse's float32 rounding; dividing by the actual
		// sum removes that rounding from the probabilities.
		sum := expAffine(drow, row, 1, lse[r], 1)
		pt := float32(float64(drow[t]) / sum)
		Scale(drow, float32(float64(d)/sum))
		drow[t] = (pt - 1) * d
	}
}

// SoftmaxWithLSE sets p[r,j] = exp(x[r,j] − lse[r]) · mul[r] for x, p [rows, cols] and lse,
// mul [rows], from a log-sum-exp computed elsewhere: on a vocab-parallel split, the global
// lse of [LogSumExpRows]' combined shards gives each rank its columns of the softmax, and
// with mul = dloss the cross-entropy gradient of those columns (the rank owning a row's label
// then subtracts dloss[r] at it). The exponentials are not renormalized, so p carries lse's
// float32 rounding (relative error up to about |lse|·2^-24). mul may be nil (all 1). A row
// with mul[r] = 0 is written as zeros. p may alias x exactly. Panics on a length mismatch (a
// programmer bug).
func SoftmaxWithLSE(p, x, lse, mul []float32, rows, cols int) {
	const op = "SoftmaxWithLSE"
	needShape(op, rows, cols)
	needLen(op, "x", len(x), rows*cols, "rows·cols")
	needLen(op, "p", len(p), rows*cols, "rows·cols")
	needLen(op, "lse", len(lse), rows, "rows")
	if mul != nil {
		needLen(op, "mul", len(mul), rows, "rows")
	}
	for r, l := range lse {
		m := float32(1)
		if mul != nil {
			m = mul[r]
		}
		pr := p[r*cols : r*cols+cols]
		if m == 0 {
			clear(pr)
			continue
		}
		expAffine(pr, x[r*cols:r*cols+cols], 1, l, m)
	}
}

// checkLabel panics unless 0 ≤ t < vocab for label t of row r.
func checkLabel(op string, r int, t int32, vocab int) {
	if t < 0 || int(t) >= vocab {
		panic(fmt.Sprintf("kernels.%s: labels[%d] = %d, want 0 ≤ label < vocab = %d (no ignore index: mask through dloss)", op, r, t, vocab))
	}
}
