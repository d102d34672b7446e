package moe

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Dispatch is where the routed tokens of one MoE forward pass go: the
// permuted rows, expert by expert, each expert's tokens in token order.
type Dispatch struct {
	// Token[n] is the token of permuted row n; Expert[n] its expert.
	Token, Expert []int
	// Counts[e] are expert e's rows; Offsets[e] the first of them.
	Counts, Offsets []int
}

// NewDispatch lists the routed (token, expert) pairs of a [T, E] map.
func NewDispatch(m []bool, t, e int) *Dispatch {
	n := 0
	for _, on := range m[:t*e] {
		if on {
			n++
		}
	}
	d := &Dispatch{Token: make([]int, 0, n), Expert: make([]int, 0, n), Counts: make([]int, e), Offsets: make([]int, e)}
	for j := 0; j < e; j++ {
		d.Offsets[j] = len(d.Token)
		for i := 0; i < t; i++ {
			if m[i*e+j] {
				d.Token = append(d.Token, i)
				d.Expert = append(d.Expert, j)
			}
		}
		d.Counts[j] = len(d.Token) - d.Offsets[j]
	}
	return d
}

// Permute gathers x [T, h] into the dispatch's rows [N, h] (Megatron's
// permute); backward adds each row's gradient back to its token.
func Permute(t *autograd.Tape, x *autograd.Var, d *Dispatch) *autograd.Var {
	return autograd.Apply(t, permuteFn{d}, x)
}

type permuteFn struct{ d *Dispatch }

func (f permuteFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	h := x.Dim(1)
	y := tensor.New(len(f.d.Token), h)
	xd, yd := x.Data(), y.Data()
	for n, tok := range f.d.Token {
		copy(yd[n*h:(n+1)*h], xd[tok*h:(tok+1)*h])
	}
	c.State = dispatchState{f.d, x.Dim(0)}
	return y, nil
}

// dispatchState is what a permutation keeps for backward: the dispatch
// (which its unpermutation shares) and the tokens it gathered from.
type dispatchState struct {
	d      *Dispatch
	tokens int
}

// StateBytes is the dispatch's four int lists: 16 bytes per routed row
// and per expert.
func (s dispatchState) StateBytes() int64 {
	d := s.d
	return 8 * int64(len(d.Token)+len(d.Expert)+len(d.Counts)+len(d.Offsets))
}

func (f permuteFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	h := dy.Dim(1)
	dx := tensor.New(c.State.(dispatchState).tokens, h)
	dxd, dyd := dx.Data(), dy.Contiguous().Data()
	for n, tok := range f.d.Token {
		kernels.AddInto(dxd[tok*h:(tok+1)*h], dyd[n*h:(n+1)*h])
	}
	return []*tensor.Tensor{dx}, nil
}

// Unpermute combines the experts' rows y [N, h] back into tokens with the
// routing probabilities probs [T, E] (Megatron's unpermute with the
// probabilities applied there): out[t] = Σ_n probs[t, e_n]·y[n] over the
// rows n of token t. Backward: dy[n] = probs[t, e_n]·dout[t],
// dprobs[t, e_n] = dout[t]·y[n].
func Unpermute(t *autograd.Tape, y, probs *autograd.Var, d *Dispatch) *autograd.Var {
	return autograd.Apply(t, unpermuteFn{d}, y, probs)
}

type unpermuteFn struct{ d *Dispatch }

func (f unpermuteFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	y, p := in[0].Contiguous(), in[1].Contiguous()
	h, e := y.Dim(1), p.Dim(1)
	out := tensor.New(p.Dim(0), h)
	yd, pd, od := y.Data(), p.Data(), out.Data()
	for n, tok := range f.d.Token {
		kernels.Axpy(od[tok*h:(tok+1)*h], pd[tok*e+f.d.Expert[n]], yd[n*h:(n+1)*h])
	}
	if c.Recording() {
		c.Save(y, p)
	}
	return out, nil
}

func (f unpermuteFn) Backward(c *autograd.Ctx, dout *tensor.Tensor) ([]*tensor.Tensor, error) {
	s := c.Saved()
	y, p := s[0], s[1]
	h, e := y.Dim(1), p.Dim(1)
	dy, dp := tensor.New(y.Shape()...), tensor.New(p.Shape()...)
	yd, pd, dod, dyd, dpd := y.Data(), p.Data(), dout.Contiguous().Data(), dy.Data(), dp.Data()
	for n, tok := range f.d.Token {
		g := dod[tok*h : (tok+1)*h]
		kernels.Axpy(dyd[n*h:(n+1)*h], pd[tok*e+f.d.Expert[n]], g)
		var dot float64
		for j, v := range yd[n*h : (n+1)*h] {
			dot += float64(v * g[j])
		}
		dpd[tok*e+f.d.Expert[n]] = float32(dot)
	}
	return []*tensor.Tensor{dy, dp}, nil
}

// Experts are the local experts' parameters, in order: linear_fc1's
// weights W1 [f₁, h] and linear_fc2's W2 [h, f] (f₁ = 2f gated), and, with
// add_bias_linear, their biases B1 [f₁] and B2 [h] (nil: none).
type Experts struct {
	W1, W2, B1, B2 []*autograd.Var
}

// inputs are the Function inputs of an MLP over the experts: x, then every
// parameter, so that each parameter's gradient hooks run when its backward
// is done.
func (w Experts) inputs(x *autograd.Var) []*autograd.Var {
	in := append([]*autograd.Var{x}, w.W1...)
	in = append(in, w.W2...)
	in = append(in, w.B1...)
	return append(in, w.B2...)
}

// GroupedMLP runs every expert's MLP on its contiguous rows of x [N, h]
// (Counts[e] rows each, in expert order) as one operation: for expert e,
//
//	y_e = act(x_e·W1_eᵀ + b1_e)·W2_eᵀ + b2_e      (gated: act(gate)·up)
//
// a loop of GEMMs over the slices with no copies (Megatron's grouped
// GEMM on a CPU), on OpenBLAS (tensor.GemmVarying: the slices' sizes
// change with the routing), the experts side by side on the rank's cores
// when they are balanced enough (eachExpert). The weights accumulate their
// gradients as o says (nn.AccumulateWeightGrad); b2 is added as o says
// (MLPOptions.OmitFC2Bias).
func GroupedMLP(t *autograd.Tape, x *autograd.Var, w Experts, counts []int, o MLPOptions) *autograd.Var {
	return autograd.Apply(t, &groupedFn{w: w, counts: counts, o: o}, w.inputs(x)...)
}

// MLPOptions are the experts' MLP settings of GroupedMLP and
// SequentialMLP: the activation, gating, and whether the weight gradients
// are computed apart from their accumulation (Megatron without
// gradient_accumulation_fusion; the zero value fuses).
type MLPOptions struct {
	Act               kernels.Activation
	Gated             bool
	UnfusedWeightGrad bool
	// OmitFC2Bias leaves linear_fc2's bias out of this rank's output: the
	// output is a partial sum over the expert tensor-parallel group that
	// the dispatcher adds up, and the group's first rank adds the bias, so
	// the sum holds it once. Every rank still computes the bias's
	// gradient, the column sum of the whole output gradient it receives,
	// so the replicas stay equal.
	OmitFC2Bias bool
}

type groupedFn struct {
	w      Experts
	counts []int
	o      MLPOptions
}

type groupedState struct {
	u []*tensor.Tensor // per expert: the activation's input, linear_fc1's output plus b1
}

func (f *groupedFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	e := len(f.w.W1)
	n, h := x.Dim(0), x.Dim(1)
	if err := f.check(n); err != nil {
		return nil, err
	}
	y := tensor.New(n, h)
	st := groupedState{u: make([]*tensor.Tensor, e)}
	offs := offsets(f.counts)
	eachExpert(f.counts, c.Tape().Workers(), func(j, workers int) {
		k, off := f.counts[j], offs[j]
		w1, w2 := in[1+j], in[1+e+j]
		xe := x.Narrow(0, off, k)
		u := tensor.New(k, w1.Dim(0)) // [k, f1]
		tensor.GemmVarying(workers, false, true, 1, nn.GemmInput(workers, xe, w1), w1, 0, u)
		if f.w.B1 != nil {
			addRows(u.Data(), in[1+2*e+j].Float32().Contiguous().Data())
		}
		a := f.activate(u)
		ye := y.Narrow(0, off, k)
		tensor.GemmVarying(workers, false, true, 1, nn.GemmInput(workers, a, w2), w2, 0, ye)
		if f.w.B2 != nil && !f.o.OmitFC2Bias {
			addRows(ye.Data(), in[1+2*e+len(f.w.B1)+j].Float32().Contiguous().Data())
		}
		st.u[j] = u
	})
	if c.Recording() {
		c.Save(x)
		c.State = st
	}
	return y, nil
}

// check verifies that the rows, counts and parameters agree.
func (f *groupedFn) check(n int) error {
	w, e := f.w, len(f.w.W1)
	sum := 0
	for _, k := range f.counts {
		sum += k
	}
	if sum != n || len(w.W2) != e || len(f.counts) != e || (w.B1 != nil && len(w.B1) != e) || (w.B2 != nil && len(w.B2) != e) {
		return fmt.Errorf("moe: grouped MLP of %d rows for expert counts %v (%d fc1, %d fc2 weights, %d fc1, %d fc2 biases)",
			n, f.counts, len(w.W1), len(w.W2), len(w.B1), len(w.B2))
	}
	return nil
}

// addRows adds b to every row of the row-major y.
func addRows(y, b []float32) {
	for r := 0; r+len(b) <= len(y); r += len(b) {
		kernels.AddInto(y[r:r+len(b)], b)
	}
}

// offsets are the first rows of each expert's slice.
func offsets(counts []int) []int {
	out := make([]int, len(counts))
	off := 0
	for j, k := range counts {
		out[j] = off
		off += k
	}
	return out
}

// eachExpert calls fn(j, w) for every expert j with rows, w being the
// cores fn may use: with several cores and no expert holding more than
// 1/workers of the rows, the experts run concurrently, largest first, one
// core each (a CPU's grouped GEMM: small GEMMs side by side rather than
// each split over the cores); otherwise one after another on every core.
// Each expert's arithmetic depends on w alone, so the result does not
// depend on the schedule.
func eachExpert(counts []int, workers int, fn func(j, w int)) {
	var order []int
	total, most := 0, 0
	for j, k := range counts {
		if k > 0 {
			order = append(order, j)
			total += k
			most = max(most, k)
		}
	}
	if workers <= 1 || len(order) < 2 || most*workers > total {
		for _, j := range order {
			fn(j, workers)
		}
		return
	}
	sort.SliceStable(order, func(a, b int) bool { return counts[order[a]] > counts[order[b]] })
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(order)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(order); i = int(next.Add(1)) - 1 {
				fn(order[i], 1)
			}
		}()
	}
	wg.Wait()
}

// activate returns act(u) [k, f], or act(gate)·up for a gated u [k, 2f].
func (f *groupedFn) activate(u *tensor.Tensor) *tensor.Tensor {
	k, f1 := u.Dim(0), u.Dim(1)
	if f.o.Gated {
		a := tensor.New(k, f1/2)
		kernels.GLUForward(f.o.Act, a.Data(), u.Data(), k, f1/2)
		return a
	}
	a := tensor.New(k, f1)
	kernels.ActivationForward(f.o.Act, a.Data(), u.Data())
	return a
}

func (f *groupedFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	st := c.State.(groupedState)
	w := f.w
	h := x.Dim(1)
	dx := tensor.New(x.Shape()...)
	dy = dy.Contiguous()
	offs := offsets(f.counts)
	fused := !f.o.UnfusedWeightGrad
	eachExpert(f.counts, c.Tape().Workers(), func(j, workers int) {
		k, off := f.counts[j], offs[j]
		w1, w2 := w.W1[j].Value, w.W2[j].Value
		xe, dye := x.Narrow(0, off, k), dy.Narrow(0, off, k)
		u := st.u[j]
		a := f.activate(u) // recomputed: the activation's output is not kept
		ff, f1 := a.Dim(1), u.Dim(1)
		if w.B2 != nil {
			nn.AccumulateGrad(c, w.B2[j], func(dst []float32) { kernels.ColumnSumInto(dst, dye.Data(), k, h) })
		}
		dyg := nn.GemmInput(workers, dye, w2)
		nn.AccumulateWeightGrad(c, w.W2[j], fused, func(dst []float32) {
			tensor.GemmVarying(workers, true, false, 1, dyg, nn.GemmInput(workers, a, w2), 1, tensor.FromSlice(dst, h, ff))
		})
		da := tensor.New(k, ff)
		tensor.GemmVarying(workers, false, false, 1, dyg, w2, 0, da)
		du := tensor.New(u.Shape()...)
		if f.o.Gated {
			kernels.GLUBackward(f.o.Act, du.Data(), da.Data(), u.Data(), k, ff)
		} else {
			kernels.ActivationBackward(f.o.Act, du.Data(), da.Data(), u.Data())
		}
		if w.B1 != nil {
			nn.AccumulateGrad(c, w.B1[j], func(dst []float32) { kernels.ColumnSumInto(dst, du.Data(), k, f1) })
		}
		dug := nn.GemmInput(workers, du, w1)
		nn.AccumulateWeightGrad(c, w.W1[j], fused, func(dst []float32) {
			tensor.GemmVarying(workers, true, false, 1, dug, nn.GemmInput(workers, xe, w1), 1, tensor.FromSlice(dst, f1, h))
		})
		tensor.GemmVarying(workers, false, false, 1, dug, w1, 0, dx.Narrow(0, off, k))
	})
	grads := make([]*tensor.Tensor, len(w.inputs(nil)))
	grads[0] = dx
	return grads, nil
}

// StateBytes is the memory of the kept fc1 outputs.
func (st groupedState) StateBytes() int64 {
	var n int64
	for _, u := range st.u {
		if u != nil {
			n += 4 * int64(u.Len())
		}
	}
	return n
}

// SequentialMLP runs every expert's MLP on its contiguous rows of x [N, h]
// (Counts[e] rows each, in expert order) one after another as separate
// operations — the rows narrowed out, linear_fc1, the bias and activation,
// linear_fc2, its bias, the outputs concatenated back in order (Megatron's
// SequentialMLP, moe_grouped_gemm off) — with the same arithmetic as
// GroupedMLP (its GEMMs through tensor.GemmVarying too: the rows change
// with the routing).
func SequentialMLP(t *autograd.Tape, x *autograd.Var, w Experts, counts []int, o MLPOptions) *autograd.Var {
	var outs []*autograd.Var
	off := 0
	for j, k := range counts {
		// An expert without rows still runs (on none), as the reference's:
		// its weights get a (zero) gradient, and their grad hooks fire.
		var b1 *autograd.Var
		if w.B1 != nil {
			b1 = w.B1[j]
		}
		u := autograd.Apply(t, nn.LinearFn{W: w.W1[j], Varying: true, UnfusedWeightGrad: o.UnfusedWeightGrad}, autograd.Narrow(t, x, 0, off, k), w.W1[j])
		u = nn.MLPActivation(t, u, b1, o.Act, o.Gated)
		y := autograd.Apply(t, nn.LinearFn{W: w.W2[j], Varying: true, UnfusedWeightGrad: o.UnfusedWeightGrad}, u, w.W2[j])
		if w.B2 != nil {
			y = autograd.Apply(t, fc2BiasFn{b: w.B2[j], omit: o.OmitFC2Bias}, y, w.B2[j])
		}
		outs = append(outs, y)
		off += k
	}
	if len(outs) == 0 {
		return autograd.Narrow(t, x, 0, 0, 0)
	}
	return autograd.Cat(t, 0, outs...)
}

// fc2BiasFn adds an expert's linear_fc2 bias b [h] to its rows y [k, h],
// or, omitting it (MLPOptions.OmitFC2Bias), passes y on; either way b's
// gradient is the column sum of the rows' gradient.
type fc2BiasFn struct {
	b    *autograd.Var
	omit bool
}

func (f fc2BiasFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	y := in[0].Contiguous().Clone()
	if err := nn.CheckParam(f.b, "expert linear_fc2 bias"); err != nil {
		return nil, err
	}
	if !f.omit {
		addRows(y.Data(), in[1].Float32().Contiguous().Data())
	}
	return y, nil
}

func (f fc2BiasFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dy = dy.Contiguous()
	if c.NeedsGrad(1) {
		h := f.b.Value.Len()
		nn.AccumulateGrad(c, f.b, func(dst []float32) { kernels.ColumnSumInto(dst, dy.Data(), dy.Len()/h, h) })
	}
	return []*tensor.Tensor{dy, nil}, nil
}
