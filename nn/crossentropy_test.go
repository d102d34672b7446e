package nn_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// refCrossEntropy is loss_r = log Σ_j exp(x_rj) − x_r[label_r], with the
// row maximum taken out first.
func refCrossEntropy(x []float64, labels []int32, v int) []float64 {
	loss := make([]float64, len(labels))
	for r, l := range labels {
		row := x[r*v : (r+1)*v]
		m := math.Inf(-1)
		for _, z := range row {
			m = math.Max(m, z)
		}
		var s float64
		for _, z := range row {
			s += math.Exp(z - m)
		}
		loss[r] = m + math.Log(s) - row[l]
	}
	return loss
}

func randLabels(seed uint64, n, v int) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]int32, n)
	for i := range l {
		l[i] = int32(r.IntN(v))
	}
	return l
}

func crossEntropyOp(labels []int32) opFunc {
	return func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
		return nn.CrossEntropy(t, in[0], labels)
	}
}

func TestCrossEntropyGradcheck(t *testing.T) {
	for i, c := range []struct {
		shape []int
		shift float32
	}{
		{[]int{1, 1}, 0},
		{[]int{6, 11}, 0},
		{[]int{3, 2, 5}, 0},
		{[]int{4, 9}, 1000}, // large logits: the max must be taken out
	} {
		v := c.shape[len(c.shape)-1]
		x := gradcheck.Randn(uint64(i), 2, c.shape...)
		for k := range x.Data() {
			x.Data()[k] += c.shift
		}
		labels := randLabels(uint64(i), x.Len()/v, v)
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{x},
			Grad:   []bool{true},
			Op:     crossEntropyOp(labels),
			Ref:    func(in [][]float64) []float64 { return refCrossEntropy(in[0], labels, v) },
			Seed:   uint64(i),
		})
		if err != nil {
			t.Errorf("shape %v shift %v: %v", c.shape, c.shift, err)
		}
	}
}

func TestCrossEntropyWorkersAgree(t *testing.T) {
	// 67 rows of 769: 3 workers with chunks of 22, 22 and 23 rows. Every
	// row's loss and gradient is its own arithmetic: bitwise.
	const rows, v = 67, 769
	x := gradcheck.Randn(1, 3, rows, v)
	labels := randLabels(2, rows, v)
	ref := func(in [][]float64) []float64 { return refCrossEntropy(in[0], labels, v) }
	r3 := checkSampled(t, "cross entropy, 3 workers", 3, []*tensor.Tensor{x}, []bool{true}, crossEntropyOp(labels), ref, 60, 1e-4)
	r1, err := run(1, []*tensor.Tensor{x}, []bool{true}, crossEntropyOp(labels), 99)
	if err != nil {
		t.Fatal(err)
	}
	numtest.SameBits(t, "loss, 1 vs 3 workers", r1.out, r3.out)
	numtest.SameBits(t, "dlogits, 1 vs 3 workers", r1.grads[0], r3.grads[0])
	// Every label's column must be checked, not only random ones: the
	// gradient there is softmax − 1.
	for r, l := range labels[:5] {
		k := r*v + int(l)
		if g := r3.grads[0][k]; g*r3.dy[r] > 0 && r3.dy[r] != 0 {
			t.Fatalf("row %d: gradient at the label %v has the sign of dloss %v", r, g, r3.dy[r])
		}
	}
}

func TestCrossEntropyErrors(t *testing.T) {
	for _, c := range []struct {
		labels []int32
		want   string
	}{
		{[]int32{0, 5}, "label 5 at position 1"},
		{[]int32{-1, 0}, "label -1 at position 0"},
		{[]int32{0}, "2 rows of logits, 1 labels"},
	} {
		tape := autograd.NewTape(context.Background())
		nn.CrossEntropy(tape, autograd.Const(tensor.New(2, 5)), c.labels)
		if err := tape.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("labels %v: err = %v, want %q", c.labels, err, c.want)
		}
	}
}
