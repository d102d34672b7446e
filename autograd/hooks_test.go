package autograd_test

import (
	"context"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/tensor"
)

// hookLog records each call of a leaf's hook with a copy of its Grad at
// that moment (nil if it had none).
type hookLog struct{ seen []*tensor.Tensor }

func (h *hookLog) attach(v *autograd.Var) {
	v.AddGradHook(func(_ context.Context, v *autograd.Var) {
		if v.Grad == nil {
			h.seen = append(h.seen, nil)
			return
		}
		h.seen = append(h.seen, v.Grad.Clone())
	})
}

// stopFn is the identity forward and returns no gradient (nil) backward:
// the path through it carries nothing.
type stopFn struct{}

func (stopFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return in[0].Clone(), nil
}

func (stopFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{nil}, nil
}

func TestHookRunsOnceAfterAllContributionsOfATiedLeaf(t *testing.T) {
	// w is used at three depths: directly by the last op, in the middle and
	// at the bottom, so its contributions arrive at different points of the
	// walk. y = Σ c⊙(w + 2·(w + 3·(w + x))) = Σ c⊙(9w + 6x): dw = 9c.
	tape := autograd.NewTape(t.Context())
	w := autograd.NewLeaf(gradcheck.Randn(1, 1, 2, 3), "shared.weight", true)
	x := autograd.NewLeaf(gradcheck.Randn(2, 1, 2, 3), "x", true)
	var wl, xl hookLog
	wl.attach(w)
	xl.attach(x)
	c := gradcheck.Randn(3, 1, 2, 3)
	inner := autograd.Scale(tape, autograd.Add(tape, w, x), 3)
	mid := autograd.Scale(tape, autograd.Add(tape, w, inner), 2)
	y := autograd.WeightedSum(tape, autograd.Add(tape, w, mid), c)
	if err := autograd.Backward(tape, y, nil); err != nil {
		t.Fatal(err)
	}
	if len(wl.seen) != 1 || len(xl.seen) != 1 {
		t.Fatalf("hooks ran %d (w) and %d (x) times, want once each", len(wl.seen), len(xl.seen))
	}
	for i, v := range wl.seen[0].Data() {
		want := 9 * float64(c.Data()[i])
		if d := float64(v) - want; d > 1e-5 || d < -1e-5 {
			t.Fatalf("w.Grad when its hook ran: [%d] = %v, want %v (all contributions)", i, v, want)
		}
	}
	if !sameFloats(wl.seen[0].Data(), w.Grad.Data()) {
		t.Fatal("w.Grad changed after its hook ran")
	}

	// A second pass runs the hook once more, with the accumulated sum.
	y = autograd.WeightedSum(tape, autograd.Add(tape, w, autograd.Add(tape, w, x)), c)
	if err := autograd.Backward(tape, y, nil); err != nil {
		t.Fatal(err)
	}
	if len(wl.seen) != 2 {
		t.Fatalf("after two passes the hook ran %d times, want 2", len(wl.seen))
	}
	for i, v := range wl.seen[1].Data() {
		want := 11 * float64(c.Data()[i])
		if d := float64(v) - want; d > 1e-5 || d < -1e-5 {
			t.Fatalf("w.Grad after two passes: [%d] = %v, want %v", i, v, want)
		}
	}
}

func TestHookRunsForALeafUsedTwiceByOneNode(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	w := autograd.NewLeaf(tensor.Full(1, 3), "w", true)
	var l hookLog
	l.attach(w)
	if err := autograd.Backward(tape, autograd.Sum(tape, autograd.Add(tape, w, w)), nil); err != nil {
		t.Fatal(err)
	}
	if len(l.seen) != 1 || !sameFloats(l.seen[0].Data(), []float32{2, 2, 2}) {
		t.Fatalf("hook calls %d, grad %v; want one call with 2s", len(l.seen), l.seen)
	}
}

func TestHookRunsForLeafWhosePathCarriesNoGradient(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	// a feeds a Function that returns nil for it directly.
	a := autograd.NewLeaf(tensor.Full(1, 4), "a", true)
	// b feeds a node that itself receives nothing (its only consumer
	// returns nil), so b's use is counted on the "nothing flowed" path.
	b := autograd.NewLeaf(tensor.Full(1, 4), "b", true)
	// c reaches the output both through a dead path and a live one.
	c := autograd.NewLeaf(tensor.Full(1, 4), "c", true)
	var al, bl, cl hookLog
	al.attach(a)
	bl.attach(b)
	cl.attach(c)

	deadA := autograd.Apply(tape, stopFn{}, a)
	deadB := autograd.Apply(tape, stopFn{}, autograd.Scale(tape, autograd.Add(tape, b, c), 2))
	live := autograd.Scale(tape, c, 3)
	y := autograd.Sum(tape, autograd.Add(tape, autograd.Add(tape, deadA, deadB), live))
	if err := autograd.Backward(tape, y, nil); err != nil {
		t.Fatal(err)
	}
	if len(al.seen) != 1 || al.seen[0] != nil {
		t.Fatalf("a: %d hook calls (grad %v); want one call with no gradient", len(al.seen), al.seen)
	}
	if len(bl.seen) != 1 || bl.seen[0] != nil {
		t.Fatalf("b: %d hook calls (grad %v); want one call with no gradient", len(bl.seen), bl.seen)
	}
	if len(cl.seen) != 1 || cl.seen[0] == nil || !sameFloats(cl.seen[0].Data(), []float32{3, 3, 3, 3}) {
		t.Fatalf("c: %d hook calls (grad %v); want one call with 3s", len(cl.seen), cl.seen)
	}
}

func TestHooksRunInRegistrationOrder(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	w := autograd.NewLeaf(tensor.Full(1, 2), "w", true)
	var order []int
	w.AddGradHook(func(context.Context, *autograd.Var) { order = append(order, 1) })
	w.AddGradHook(func(context.Context, *autograd.Var) { order = append(order, 2) })
	if err := autograd.Backward(tape, autograd.Sum(tape, w), nil); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != 1 || order[1] != 2 {
		t.Fatalf("hook order %v, want [1 2]", order)
	}
}

func TestNoHookForLeafNotRequiringGrad(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	w := autograd.NewLeaf(tensor.Full(1, 2), "frozen", false)
	x := autograd.NewLeaf(tensor.Full(1, 2), "x", true)
	calls := 0
	w.AddGradHook(func(context.Context, *autograd.Var) { calls++ })
	if err := autograd.Backward(tape, autograd.Sum(tape, autograd.Add(tape, w, x)), nil); err != nil {
		t.Fatal(err)
	}
	if calls != 0 || w.Grad != nil {
		t.Fatalf("frozen leaf: %d hook calls, grad %v", calls, w.Grad)
	}
}
