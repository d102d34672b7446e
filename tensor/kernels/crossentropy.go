package kernels

import (
	"fmt"
	"math"
)

// LogSumExpRows sets lse[r] = log Σ_j exp(x[r,j]) for x [rows, cols], lse [rows], stably:
// with M the row's maximum, lse = M + log Σ exp(x − M). The sum is accumulated in float64
// and the result rounded once. −Inf entries contribute nothing (a row of −Inf gives −Inf).
// On a vocab-parallel split each rank's lse of its columns combines into the global one as
// M' + log Σ_ranks exp(lse − M'). Panics on a length mismatch (a programmer bug).
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
// float64 log-sum-exp before rounding, so a small loss keeps its relative precision.
//
// A negative label means that the row's target lies outside these columns (as on the other
// ranks of a vocab-parallel split): loss[r] = lse[r]. There is no ignore index; the loss mask
// is applied by callers through dloss and the loss reduction. A label ≥ vocab panics, as does
// a length mismatch (programmer bugs).
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
		if t := labels[r]; t >= 0 {
			checkLabel(op, r, t, vocab)
			l -= float64(row[t])
		}
		loss[r] = float32(l)
	}
}

// CrossEntropyBackward is the gradient of [CrossEntropyForward] with respect to the logits:
//
//	dlogits[r,j] = (softmax(logits[r])[j] − [j = labels[r]]) · dloss[r]
//
// with softmax(logits[r])[j] = exp(logits[r,j] − lse[r]) from the saved lse (probabilities
// below e^-87 are flushed to 0). A row with dloss[r] = 0 (a masked token) is written as zeros
// without evaluating exponentials. Negative labels mean "not among these columns", as in the
// forward. Shapes: dlogits, logits [rows, vocab]; lse, labels, dloss [rows].
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
		if t >= 0 {
			checkLabel(op, r, t, vocab)
		}
		if d == 0 {
			clear(drow)
			continue
		}
		var pt float32
		if t >= 0 {
			pt = expf(row[t] - lse[r]) // read before an aliased write overwrites it
		}
		expAffine(drow, row, 1, lse[r], d)
		if t >= 0 {
			drow[t] = (pt - 1) * d
		}
	}
}

// checkLabel panics if label t of row r is not below vocab.
func checkLabel(op string, r int, t int32, vocab int) {
	if int(t) >= vocab {
		panic(fmt.Sprintf("kernels.%s: labels[%d] = %d, want < vocab = %d (negative means not in these columns)", op, r, t, vocab))
	}
}
