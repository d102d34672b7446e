package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// AccumulateGrad adds one backward pass's contribution to the gradient of
// the parameter v: add must add the contribution into dst, a float32 slice
// of v's element count laid out as v's value (row-major). The Functions
// that accumulate parameter gradients directly (linear, layer norm,
// bias-GELU, embeddings, the tensor-parallel layers) all go through it, so
// the rounding rule lives here:
//
//   - Grad nil: it is allocated as float32 zeros of v's shape (GradBuffer;
//     a float32 main gradient, whatever v's dtype) and add writes into it.
//   - Grad float32: add writes straight into it (the float32 layers' path,
//     unchanged).
//   - Grad bfloat16 or float16: add writes into a zeroed float32 scratch,
//     then Grad = round(Grad + scratch) element by element, the float32 sum
//     of the widened gradient and the scratch rounded once to nearest even
//     (kernels.AddRoundBF16, kernels.AddRoundF16).
//
// So a 16-bit gradient starting at zero holds round(g1) after a pass
// contributing g1, and round(round(g1) + g2) after a second contributing
// g2, where g1 and g2 are what one pass adds into a zero float32 gradient.
// The scratch has v's size and lives only during the addition. Grad must
// be contiguous (CheckParam); a non-contiguous one panics.
//
// The contribution is added through c (autograd.Ctx.AccumulateParam): at
// once, or, in a split backward (autograd.BackwardSplit), as the pass's
// queued weight-gradient work; add then runs later, so it must only read
// what stays unchanged until then (the Function's saved tensors, its
// output gradient, slices it computed).
func AccumulateGrad(c *autograd.Ctx, v *autograd.Var, add func(dst []float32)) {
	c.AccumulateParam(v, func() { accumulateGrad(v, add) })
}

// accumulateGrad is AccumulateGrad's addition, now.
func accumulateGrad(v *autograd.Var, add func(dst []float32)) {
	if v.Grad == nil || v.Grad.DType() == tensor.Float32 {
		add(GradBuffer(v).Data())
		return
	}
	scratch := make([]float32, v.Grad.Len())
	add(scratch)
	addRounded(v.Grad, scratch)
}

// AccumulateWeightGrad is AccumulateGrad for a linear layer's weight
// gradient dW += dYᵀ·X, which gemm adds into dst, under Megatron's
// gradient_accumulation_fusion (config.ModelParallelConfig):
//
//   - fused: the GEMM accumulates straight into the main gradient
//     (AccumulateGrad; APEX's wgrad_gemm_accum_fp32), no weight-sized
//     temporary;
//   - not fused: the GEMM writes a fresh float32 product, which is rounded
//     to the weight's type when that is 16-bit (the reference computes
//     weight.grad in the parameter's dtype) and then added to the main
//     gradient (the reference's main_grad.add_(grad) in the DDP hook).
//
// In float32 the two differ only in the order the GEMM adds its partial
// sums to the gradient already there; in bfloat16 or float16 the unfused
// product is rounded to 16 bits once more before it is added. Either way
// the GEMM runs where AccumulateGrad's addition runs: at once, or as the
// split backward's queued work.
func AccumulateWeightGrad(c *autograd.Ctx, v *autograd.Var, fused bool, gemm func(dst []float32)) {
	c.AccumulateParam(v, func() { weightGrad(v, fused, gemm) })
}

// weightGrad is AccumulateWeightGrad's work, now.
func weightGrad(v *autograd.Var, fused bool, gemm func(dst []float32)) {
	if fused {
		accumulateGrad(v, gemm)
		return
	}
	product := make([]float32, v.Value.Len())
	gemm(product)
	if d := v.Value.DType(); d.IsHalf() {
		roundThrough(d, product)
	}
	accumulateGrad(v, func(dst []float32) { kernels.AddInto(dst, product) })
}

// roundThrough rounds every element of x to the 16-bit type d and back.
func roundThrough(d tensor.DType, x []float32) {
	bits := make([]uint16, len(x))
	switch d {
	case tensor.BFloat16:
		kernels.F32ToBF16(bits, x)
		kernels.BF16ToF32(x, bits)
	case tensor.Float16:
		kernels.F32ToF16(bits, x)
		kernels.F16ToF32(x, bits)
	default:
		panic(fmt.Sprintf("nn: rounding through %v", d))
	}
}

// addRounded sets g = round(g + src) for a contiguous 16-bit g.
func addRounded(g *tensor.Tensor, src []float32) {
	switch d := g.DType(); d {
	case tensor.BFloat16:
		kernels.AddRoundBF16(g.Bits(), src)
	case tensor.Float16:
		kernels.AddRoundF16(g.Bits(), src)
	default:
		panic(fmt.Sprintf("nn: rounding a gradient contribution into a %v gradient", d))
	}
}

// GemmInput returns an activation x as a GEMM with the parameter w reads
// it: rounded to w's 16-bit type (tensor.ToHalf: a new contiguous tensor,
// or x itself when it already is one) when w is bfloat16 or float16, and x
// unchanged when w is float32. The linear layers round their input, and
// their output gradient in backward, once with it, use the rounded tensor
// in both the GEMM and (for the input) what they save for backward.
// The rounding runs on up to workers goroutines (a large activation's
// pass over memory is worth both cores).
func GemmInput(workers int, x, w *tensor.Tensor) *tensor.Tensor {
	if d := w.DType(); d.IsHalf() {
		return tensor.ToHalfOn(workers, x, d)
	}
	return x
}

// values returns t's elements as float32: t's own storage when it is a
// contiguous float32 tensor, else a widened (or contiguous) copy. Layers
// read 16-bit parameters (layer-norm weights, biases, position rows)
// through it: widening is exact, so they compute in float32 on exactly the
// stored values.
func values(t *tensor.Tensor) []float32 { return t.Float32().Contiguous().Data() }
