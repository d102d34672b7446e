package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// CrossEntropy returns the per-token loss [N] of logits [N, V] against
// labels [N]: loss_i = logsumexp(logits_i) − logits_i[label_i], computed in
// fp32 with the max subtracted. Labels must lie in [0, V). Backward
// overwrites the saved logits with their gradient
// (softmax − onehot)·dloss_i, so logits must not be used after backward
// (it is the output layer's result, which nothing else reads).
func CrossEntropy(t *autograd.Tape, logits *autograd.Var, labels []int32) *autograd.Var {
	return autograd.Apply(t, crossEntropyFn{labels: labels}, logits)
}

type crossEntropyFn struct{ labels []int32 }

func (f crossEntropyFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	v := x.Dim(-1)
	rows := x.Len() / v
	if rows != len(f.labels) {
		return nil, fmt.Errorf("nn: cross entropy: %d rows of logits, %d labels", rows, len(f.labels))
	}
	for i, l := range f.labels {
		if l < 0 || int(l) >= v {
			return nil, fmt.Errorf("nn: cross entropy: label %d at position %d is outside the vocabulary [0, %d)", l, i, v)
		}
	}
	loss := tensor.New(rows)
	lse := make([]float32, rows)
	xd, ld := x.Data(), loss.Data()
	parallelRows(rows, split(c, rows, v), func(_, lo, hi int) {
		kernels.CrossEntropyForward(ld[lo:hi], lse[lo:hi], xd[lo*v:hi*v], f.labels[lo:hi], hi-lo, v)
	})
	if c.Recording() {
		c.Save(x)
		c.State = lse
	}
	return loss, nil
}

func (f crossEntropyFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	lse := c.State.([]float32)
	v := x.Dim(-1)
	rows := x.Len() / v
	xd, dd := x.Data(), dy.Data()
	parallelRows(rows, split(c, rows, v), func(_, lo, hi int) {
		kernels.CrossEntropyBackward(xd[lo*v:hi*v], xd[lo*v:hi*v], lse[lo:hi], f.labels[lo:hi], dd[lo:hi], hi-lo, v)
	})
	return []*tensor.Tensor{x}, nil
}
