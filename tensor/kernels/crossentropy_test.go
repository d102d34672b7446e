package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// refLSE is log Σ exp(x) in float64, shifted by the maximum.
func refLSE(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// refCrossEntropy returns per-row losses and lse in float64.
func refCrossEntropy(logits []float64, labels []int32, rows, vocab int) (loss, lse []float64) {
	loss, lse = make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		row := logits[r*vocab : (r+1)*vocab]
		lse[r] = refLSE(row)
		loss[r] = lse[r] - row[labels[r]]
	}
	return loss, lse
}

// refCrossEntropyGrad is (softmax − onehot)·dloss in float64.
func refCrossEntropyGrad(logits []float64, labels []int32, dloss []float64, rows, vocab int) []float64 {
	d := make([]float64, rows*vocab)
	for r := 0; r < rows; r++ {
		row := logits[r*vocab : (r+1)*vocab]
		l := refLSE(row)
		for j, v := range row {
			p := math.Exp(v - l)
			if int32(j) == labels[r] {
				p--
			}
			d[r*vocab+j] = p * dloss[r]
		}
	}
	return d
}

func ceCase(g *rng.RNG, rows, vocab int, std float64) ([]float32, []int32) {
	logits := normal(g, rows*vocab, 0, std)
	labels := make([]int32, rows)
	for r := range labels {
		labels[r] = int32(g.Uint64n(uint64(vocab)))
	}
	return logits, labels
}

func TestCrossEntropyForwardMatchesReference(t *testing.T) {
	g := rng.New(10)
	for _, c := range []struct {
		rows, vocab int
		std         float64
	}{{1, 1, 1}, {4, 3, 1}, {9, 100, 3}, {3, 4099, 10}, {2, 64, 50}} {
		logits, labels := ceCase(g, c.rows, c.vocab, c.std)
		loss, lse := make([]float32, c.rows), make([]float32, c.rows)
		CrossEntropyForward(loss, lse, logits, labels, c.rows, c.vocab)
		wl, wlse := refCrossEntropy(to64(logits), labels, c.rows, c.vocab)
		checkClose(t, "lse", lse, wlse, 2e-7, 1e-7)
		checkClose(t, "loss", loss, wl, 1e-6, 1e-6)

		lse2 := make([]float32, c.rows)
		LogSumExpRows(lse2, logits, c.rows, c.vocab)
		checkClose(t, "LogSumExpRows", lse2, to64(lse), 0, 0)
	}
}

func TestCrossEntropySmallLossKeepsPrecision(t *testing.T) {
	// A confident prediction: loss ≈ 3·e^-20 ≈ 6e-9, far below lse's ulp.
	logits := []float32{20, 0, 0, 0}
	loss, lse := make([]float32, 1), make([]float32, 1)
	CrossEntropyForward(loss, lse, logits, []int32{0}, 1, 4)
	want := math.Log1p(3 * math.Exp(-20))
	if math.Abs(float64(loss[0])-want) > 1e-6*want {
		t.Errorf("loss = %v, want %v", loss[0], want)
	}
}

func TestCrossEntropyMaskedLogits(t *testing.T) {
	// −Inf logits (padded vocabulary) take no probability and get zero gradient.
	inf := float32(math.Inf(-1))
	logits := []float32{1, 2, inf, 3, inf}
	loss, lse := make([]float32, 1), make([]float32, 1)
	CrossEntropyForward(loss, lse, logits, []int32{1}, 1, 5)
	wl, wlse := refCrossEntropy([]float64{1, 2, 3}, []int32{1}, 1, 3)
	checkClose(t, "lse", lse, wlse, 2e-7, 0)
	checkClose(t, "loss", loss, wl, 1e-6, 0)
	d := make([]float32, 5)
	CrossEntropyBackward(d, logits, lse, []int32{1}, []float32{1}, 1, 5)
	if d[2] != 0 || d[4] != 0 {
		t.Errorf("gradient of masked logits = %v, %v, want 0", d[2], d[4])
	}
}

func TestCrossEntropyBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	g := rng.New(11)
	rows, vocab := 3, 5
	logits, labels := ceCase(g, rows, vocab, 2)
	dloss := to64(normal(g, rows, 0, 1))
	x := to64(logits)
	loss := func(v []float64) float64 {
		l, _ := refCrossEntropy(v, labels, rows, vocab)
		return dot64(l, dloss)
	}
	checkClose64(t, "dlogits vs FD", refCrossEntropyGrad(x, labels, dloss, rows, vocab), centralDiff(loss, x, 1e-6), 1e-6, 1e-8)
}

func TestCrossEntropyBackwardMatchesReference(t *testing.T) {
	g := rng.New(12)
	rows, vocab := 6, 1000
	logits, labels := ceCase(g, rows, vocab, 4)
	dloss := normal(g, rows, 0, 1)
	dloss[4] = 0 // a masked token
	loss, lse := make([]float32, rows), make([]float32, rows)
	CrossEntropyForward(loss, lse, logits, labels, rows, vocab)
	d := make([]float32, rows*vocab)
	for i := range d {
		d[i] = 123 // overwritten, not accumulated
	}
	CrossEntropyBackward(d, logits, lse, labels, dloss, rows, vocab)
	want := refCrossEntropyGrad(to64(logits), labels, to64(dloss), rows, vocab)
	// The exponent x − lse is a float32: relative error up to |x − lse|·2^-24 ≈ 1e-6 for the
	// smallest probabilities here (|x − lse| ≈ 16), plus a few roundings.
	checkClose(t, "dlogits", d, want, 1.5e-6, 1e-12)
	for j := 0; j < vocab; j++ {
		if d[4*vocab+j] != 0 {
			t.Fatalf("masked row: dlogits[4,%d] = %v, want 0", j, d[4*vocab+j])
		}
	}
	// In place over the logits.
	in := clone(logits)
	CrossEntropyBackward(in, in, lse, labels, dloss, rows, vocab)
	checkClose(t, "dlogits in place", in, to64(d), 0, 0)
}

// A vocab-parallel split: each shard's LogSumExpRows, combined, then SoftmaxWithLSE per shard
// and the label subtracted where it lives, gives the full cross-entropy gradient.
func TestVocabParallelComposition(t *testing.T) {
	g := rng.New(26)
	rows, vocab, shards := 5, 60, 3
	logits, labels := ceCase(g, rows, vocab, 3)
	dloss := normal(g, rows, 0, 1)
	dloss[2] = 0
	per := vocab / shards
	shard := func(k int) []float32 {
		out := make([]float32, 0, rows*per)
		for r := 0; r < rows; r++ {
			out = append(out, logits[r*vocab+k*per:r*vocab+(k+1)*per]...)
		}
		return out
	}
	lses := make([][]float32, shards)
	for k := range lses {
		lses[k] = make([]float32, rows)
		LogSumExpRows(lses[k], shard(k), rows, per)
	}
	global := make([]float32, rows)
	for r := range global {
		m := math.Inf(-1)
		for k := range lses {
			m = math.Max(m, float64(lses[k][r]))
		}
		var s float64
		for k := range lses {
			s += math.Exp(float64(lses[k][r]) - m)
		}
		global[r] = float32(m + math.Log(s))
	}
	_, wantLSE := refCrossEntropy(to64(logits), labels, rows, vocab)
	checkClose(t, "combined lse", global, wantLSE, 1e-6, 1e-6)

	want := refCrossEntropyGrad(to64(logits), labels, to64(dloss), rows, vocab)
	for k := 0; k < shards; k++ {
		d := shard(k)
		SoftmaxWithLSE(d, d, global, dloss, rows, per)
		wk := make([]float64, 0, rows*per)
		for r := 0; r < rows; r++ {
			if l := int(labels[r]); l >= k*per && l < (k+1)*per {
				d[r*per+l-k*per] -= dloss[r]
			}
			wk = append(wk, want[r*vocab+k*per:r*vocab+(k+1)*per]...)
		}
		checkClose(t, "shard gradient", d, wk, 4e-6, 1e-8)
	}
	// mul = nil is the plain softmax.
	p := make([]float32, rows*vocab)
	lse := make([]float32, rows)
	LogSumExpRows(lse, logits, rows, vocab)
	SoftmaxWithLSE(p, logits, lse, nil, rows, vocab)
	for r := 0; r < rows; r++ {
		var s float64
		for _, v := range p[r*vocab : (r+1)*vocab] {
			s += float64(v)
		}
		if math.Abs(s-1) > 2e-6 {
			t.Errorf("row %d of the softmax sums to %v", r, s)
		}
	}
}

func TestCrossEntropyPanicsOnBadLabel(t *testing.T) {
	mustPanic(t, "labels[0] = -1", func() {
		CrossEntropyForward(make([]float32, 1), make([]float32, 1), make([]float32, 3), []int32{-1}, 1, 3)
	})
	mustPanic(t, "labels[1] = 3", func() {
		CrossEntropyForward(make([]float32, 2), make([]float32, 2), make([]float32, 6), []int32{0, 3}, 2, 3)
	})
	mustPanic(t, "labels[0] = 7", func() {
		CrossEntropyBackward(make([]float32, 6), make([]float32, 6), make([]float32, 2), []int32{7, 0},
			[]float32{1, 1}, 2, 3)
	})
}
