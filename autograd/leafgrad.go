package autograd

import (
	"context"

	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// leafGrads collects one Backward pass's gradients for the leaves whose
// Grad is 16-bit (bfloat16 or float16): each leaf's contributions in the
// pass (one per use) are summed in float32, and the sum is added into Grad
// with a single rounding when the leaf's last use is done, just before its
// hooks run — as nn.AccumulateGrad sums a layer's contribution in a float32
// scratch. A nil or float32 Grad is accumulated into at once, use by use,
// as before.
type leafGrads map[*Var]*tensor.Tensor

// add records g, a gradient for the leaf v from one of its uses.
func (p leafGrads) add(v *Var, g *tensor.Tensor) {
	if v.Grad == nil || !v.Grad.DType().IsHalf() {
		accumulateLeaf(v, g)
		return
	}
	if s := p[v]; s != nil {
		kernels.AddInto(s.Data(), g.Float32().Contiguous().Data())
		return
	}
	p[v] = g.Float32().Clone()
}

// done adds v's pending 16-bit-Grad sum, if any, and runs v's hooks: all
// of v's uses in the pass are done.
func (p leafGrads) done(ctx context.Context, v *Var) {
	if s := p[v]; s != nil {
		delete(p, v)
		accumulateLeaf(v, s)
	}
	runHooks(ctx, v)
}

// accumulateLeaf adds a Function's gradient g for the leaf v into v.Grad:
// a copy of g when Grad is nil; for a float32 Grad, Grad += g in float32;
// for a bfloat16 or float16 Grad (a mixed-precision parameter's 16-bit
// gradient), Grad = round(Grad + g): the float32 sum of the widened Grad
// and g, rounded once to nearest even per element (as nn.AccumulateGrad
// does for the layers that accumulate parameter gradients directly). A
// non-contiguous Grad is updated in place through a contiguous copy, with
// the same single rounding.
func accumulateLeaf(v *Var, g *tensor.Tensor) {
	if v.Grad == nil {
		v.Grad = g.Clone()
		return
	}
	src := g.Float32().Contiguous().Data()
	if v.Grad.IsContiguous() {
		switch v.Grad.DType() {
		case tensor.BFloat16:
			kernels.AddRoundBF16(v.Grad.Bits(), src)
		case tensor.Float16:
			kernels.AddRoundF16(v.Grad.Bits(), src)
		default:
			kernels.AddInto(v.Grad.Data(), src)
		}
		return
	}
	sum := v.Grad.Float32()
	if sum == v.Grad {
		sum = v.Grad.Clone()
	}
	kernels.AddInto(sum.Data(), src)
	v.Grad.CopyFrom(sum) // rounds once into a 16-bit Grad
}
