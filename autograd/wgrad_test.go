package autograd_test

import (
	"context"
	"math"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/tensor"
)

// scaleByFn is y = w·x elementwise for a parameter w it accumulates the
// gradient of itself (dw += dy⊙x, through Ctx.AccumulateParam, as the
// linear layers do) and returns dx = dy⊙w.
type scaleByFn struct{ w *autograd.Var }

func (f scaleByFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	y := in[0].Clone()
	for i, w := range f.w.Value.Data() {
		y.Data()[i] *= w
	}
	c.Save(in[0])
	return y, nil
}

func (f scaleByFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	x := c.Saved()[0]
	c.AccumulateParam(f.w, func() {
		if f.w.Grad == nil {
			f.w.Grad = tensor.New(f.w.Value.Shape()...)
		}
		for i, d := range dy.Data() {
			f.w.Grad.Data()[i] += d * x.Data()[i]
		}
	})
	dx := dy.Clone()
	for i, w := range f.w.Value.Data() {
		dx.Data()[i] *= w
	}
	return []*tensor.Tensor{dx, nil}, nil
}

// splitModel builds y = Σ c⊙(a·(b·(x + p))) + Σ c⊙p on tape: parameters
// a and b accumulate their own gradients, p (used twice) gets its
// gradient from the engine, x is an input that needs its gradient.
type splitModel struct {
	a, b, p, x *autograd.Var
	hooks      map[string]int
}

func newSplitModel(seed uint64) *splitModel {
	param := func(s uint64, name string) *autograd.Var {
		v := autograd.NewLeaf(gradcheck.Randn(s, 1, 2, 5), name, true)
		v.MarkParameter()
		return v
	}
	m := &splitModel{a: param(seed, "a"), b: param(seed+1, "b"), p: param(seed+2, "p"),
		x: autograd.NewLeaf(gradcheck.Randn(seed+3, 1, 2, 5), "x", true), hooks: map[string]int{}}
	for _, v := range []*autograd.Var{m.a, m.b, m.p, m.x} {
		v.AddGradHook(func(_ context.Context, v *autograd.Var) { m.hooks[v.Name]++ })
	}
	return m
}

func (m *splitModel) forward(tape *autograd.Tape) *autograd.Var {
	c := gradcheck.Randn(99, 1, 2, 5)
	h := autograd.Apply(tape, scaleByFn{m.b}, autograd.Add(tape, m.x, m.p), m.b)
	y := autograd.Apply(tape, scaleByFn{m.a}, h, m.a)
	return autograd.Add(tape, autograd.WeightedSum(tape, y, c), autograd.WeightedSum(tape, m.p, c))
}

// backward runs an unsplit backward pass of m.
func (m *splitModel) backward(t *testing.T) {
	t.Helper()
	tape := autograd.NewTape(t.Context())
	if err := autograd.Backward(tape, m.forward(tape), nil); err != nil {
		t.Fatal(err)
	}
}

// sameGrads fails unless every gradient of split equals whole's bit for
// bit.
func sameGrads(t *testing.T, whole, split *splitModel) {
	t.Helper()
	for _, pair := range [][2]*autograd.Var{{whole.a, split.a}, {whole.b, split.b}, {whole.p, split.p}, {whole.x, split.x}} {
		for i, v := range pair[0].Grad.Data() {
			if math.Float32bits(v) != math.Float32bits(pair[1].Grad.Data()[i]) {
				t.Fatalf("%s[%d]: split %v, unsplit %v", pair[0].Name, i, pair[1].Grad.Data()[i], v)
			}
		}
	}
}

// TestBackwardSplit: a split backward gives the inputs their gradients at
// once and holds the parameters' back (their hooks too) until the queued
// work runs; then every gradient, over two accumulated passes, equals the
// unsplit backward's bit for bit, and each hook has run once per pass.
func TestBackwardSplit(t *testing.T) {
	whole, split := newSplitModel(1), newSplitModel(1)
	for pass := range 2 {
		whole.backward(t)
		ts := autograd.NewTape(t.Context())
		w, err := autograd.BackwardSplit(ts, split.forward(ts), nil)
		if err != nil {
			t.Fatal(err)
		}
		if split.x.Grad == nil || split.hooks["x"] != pass+1 {
			t.Fatalf("pass %d: the input x has no gradient (hooks %d) before the weight work", pass, split.hooks["x"])
		}
		if split.hooks["a"] != pass || split.hooks["p"] != pass {
			t.Fatalf("pass %d: parameter hooks ran before their work: %v", pass, split.hooks)
		}
		if pass == 0 && (split.a.Grad != nil || split.p.Grad != nil) {
			t.Fatalf("a parameter's gradient was written before the weight work ran")
		}
		if w.Len() != 4 { // a, b from the Functions; p twice from the engine
			t.Errorf("%d queued contributions, want 4", w.Len())
		}
		if err := w.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := w.Run(t.Context()); err != nil { // a second run does nothing
			t.Fatal(err)
		}
	}
	sameGrads(t, whole, split)
	for _, n := range []string{"a", "b", "p", "x"} {
		if split.hooks[n] != 2 || whole.hooks[n] != 2 {
			t.Errorf("%s: hooks ran %d (split) and %d (unsplit) times over two passes, want 2", n, split.hooks[n], whole.hooks[n])
		}
	}
}

// TestBackwardSplitHalfGrad: a parameter with a bfloat16 gradient gets the
// float32 sum of its pass's contributions rounded once, split or not.
func TestBackwardSplitHalfGrad(t *testing.T) {
	run := func(split bool) *tensor.Tensor {
		m := newSplitModel(7)
		m.p.Grad = tensor.NewOf(tensor.BFloat16, 1, 2, 5)
		tape := autograd.NewTape(t.Context())
		out := m.forward(tape)
		if !split {
			if err := autograd.Backward(tape, out, nil); err != nil {
				t.Fatal(err)
			}
			return m.p.Grad
		}
		w, err := autograd.BackwardSplit(tape, out, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Run(t.Context())
		return m.p.Grad
	}
	a, b := run(false), run(true)
	for i, v := range a.Bits() {
		if b.Bits()[i] != v {
			t.Fatalf("p[%d]: split %#04x, unsplit %#04x", i, b.Bits()[i], v)
		}
	}
}

// TestBackwardSplitMemory: what a node whose weight-gradient work is
// queued saved stays in the tape's activation count until that work has
// run; then the count is the unsplit backward's, nothing.
func TestBackwardSplitMemory(t *testing.T) {
	m := newSplitModel(3)
	tape := autograd.NewTape(t.Context())
	out := m.forward(tape)
	before := tape.ActivationBytes()
	w, err := autograd.BackwardSplit(tape, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The two scaleByFn nodes each saved a 10-element float32 input.
	if got := tape.ActivationBytes(); got != 80 || before < got {
		t.Errorf("after B: %d activation bytes (forward %d), want the 80 the queued work reads", got, before)
	}
	w.Run(t.Context())
	if got := tape.ActivationBytes(); got != 0 {
		t.Errorf("after W: %d activation bytes, want 0", got)
	}
}

// TestBackwardSplitHooksWaitWithoutGradient: a parameter no gradient
// reaches in the pass (an expert without tokens) still runs its hooks at
// W, where every other parameter's run, not during B.
func TestBackwardSplitHooksWaitWithoutGradient(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	q := autograd.NewLeaf(gradcheck.Randn(5, 1, 2, 5), "q", true)
	q.MarkParameter()
	ran := 0
	q.AddGradHook(func(context.Context, *autograd.Var) { ran++ })
	m := newSplitModel(5)
	out := autograd.Add(tape, m.forward(tape), autograd.Sum(tape, autograd.Apply(tape, stopFn{}, q)))
	w, err := autograd.BackwardSplit(tape, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ran != 0 {
		t.Fatalf("q's hook ran during B (%d times)", ran)
	}
	if err := w.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Errorf("q's hook ran %d times after W, want once", ran)
	}
}

// TestBackwardSplitOnly: only the listed parameter's contributions wait
// for the weight work, the others land with the backward, hooks
// included; after the work every gradient is the unsplit one bit for bit.
func TestBackwardSplitOnly(t *testing.T) {
	whole, split := newSplitModel(1), newSplitModel(1)
	for pass := range 2 {
		whole.backward(t)
		ts := autograd.NewTape(t.Context())
		w, err := autograd.BackwardSplitOnly(ts, split.forward(ts), nil, split.p)
		if err != nil {
			t.Fatal(err)
		}
		if split.hooks["a"] != pass+1 || split.hooks["b"] != pass+1 || split.hooks["p"] != pass {
			t.Fatalf("pass %d: hooks %v, want a and b run, p waiting", pass, split.hooks)
		}
		if w.Len() != 2 { // p twice from the engine
			t.Errorf("%d queued contributions, want 2", w.Len())
		}
		if err := w.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if split.hooks["p"] != pass+1 {
			t.Fatalf("pass %d: p's hook did not run with its work", pass)
		}
	}
	sameGrads(t, whole, split)
}
