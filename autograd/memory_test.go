package autograd

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/gotron/gotron/tensor"
)

// saveFn saves its input and a byte mask of its size, and a parameter.
type saveFn struct{}

func (saveFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	if c.Recording() {
		c.Save(in...)
		c.State = make([]byte, in[0].Len())
	}
	return in[0].Clone(), nil
}

func (saveFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	return make([]*tensor.Tensor, len(c.Saved())), nil
}

func TestActivationBytes(t *testing.T) {
	tape := NewTape(context.Background())
	x := Const(tensor.New(10))                // an input: counted
	w := NewLeaf(tensor.New(1000), "w", true) // a parameter: not counted
	w.MarkParameter()
	a := Apply(tape, saveFn{}, x, w) // saves x (40 B) + mask 10 B
	b := Apply(tape, saveFn{}, a)    // saves a (40 B) + mask 10 B
	v := View(tape, b, 2, 5)         // saves nothing
	c := Apply(tape, saveFn{}, v, b) // v and b share storage: 40 B once + 10 B
	if got, want := tape.ActivationBytes(), int64(3*(40+10)); got != want {
		t.Fatalf("after forward: %d bytes live, want %d", got, want)
	}
	if err := Backward(tape, Sum(tape, c), nil); err != nil {
		t.Fatal(err)
	}
	if got := tape.ActivationBytes(); got != 0 {
		t.Fatalf("after backward: %d bytes live, want 0", got)
	}
	if got, want := tape.PeakActivationBytes(), int64(150); got != want {
		t.Fatalf("peak %d, want %d", got, want)
	}
	tape.ResetPeakActivationBytes()
	if tape.PeakActivationBytes() != 0 {
		t.Fatalf("peak after reset %d", tape.PeakActivationBytes())
	}
	restore := tape.NoGrad()
	Apply(tape, saveFn{}, x)
	restore()
	if tape.ActivationBytes() != 0 {
		t.Fatalf("a no-grad forward kept %d bytes", tape.ActivationBytes())
	}
}

// passFn saves nothing: y = 2x.
type passFn struct{}

func (passFn) Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	y := in[0].Clone()
	y.Scale(2)
	return y, nil
}

func (passFn) Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dx := dy.Clone()
	dx.Scale(2)
	return []*tensor.Tensor{dx}, nil
}

// TestGraphHoldsNoIntermediateValues: an intermediate value that no
// Function saved is freed once the caller drops it, before backward; the
// graph keeps only nodes and shapes.
func TestGraphHoldsNoIntermediateValues(t *testing.T) {
	tape := NewTape(context.Background())
	x := NewLeaf(tensor.New(1<<16), "x", true)
	mid := Apply(tape, passFn{}, x)
	freed := make(chan struct{})
	runtime.AddCleanup(mid.Value, func(ch chan struct{}) { close(ch) }, freed)
	out := Apply(tape, passFn{}, mid)
	mid = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for done := false; !done; {
		runtime.GC()
		select {
		case <-freed:
			done = true
		case <-ctx.Done():
			t.Fatal("the intermediate value is still reachable from the graph")
		default:
			runtime.Gosched()
		}
	}
	if err := Backward(tape, Sum(tape, out), nil); err != nil {
		t.Fatal(err)
	}
	if x.Grad.Data()[0] != 4 {
		t.Fatalf("dx = %v, want 4", x.Grad.Data()[0])
	}
}

// TestActivationBytesParameters: a saved parameter is never counted, frozen
// or not; a saved leaf that is not a parameter (an input requiring grad,
// as activation recompute makes) is.
func TestActivationBytesParameters(t *testing.T) {
	tape := NewTape(context.Background())
	frozen := NewLeaf(tensor.New(100), "frozen", false)
	frozen.MarkParameter()
	trained := NewLeaf(tensor.New(100), "w", true)
	trained.MarkParameter()
	input := NewLeaf(tensor.New(10), "recomputed input", true)
	Apply(tape, saveFn{}, input, frozen, trained) // input 40 B + mask 10 B
	if got := tape.ActivationBytes(); got != 50 {
		t.Fatalf("%d bytes live, want 50 (the input and the mask, no parameter)", got)
	}
}

func TestHoldCountsAndReleaseDrops(t *testing.T) {
	tape := NewTape(context.Background())
	x := tensor.New(1000)
	tape.Hold(x)
	if got := tape.ActivationBytes(); got != 4000 {
		t.Fatalf("after Hold: %d bytes, want 4000", got)
	}
	if tape.Saved(x) {
		t.Fatal("a held tensor reported as saved by an operation")
	}
	tape.Release(x)
	if got := tape.ActivationBytes(); got != 0 {
		t.Fatalf("after Release: %d bytes, want 0", got)
	}
	if tape.PeakActivationBytes() != 4000 {
		t.Fatalf("peak %d, want 4000", tape.PeakActivationBytes())
	}
	tape.Unhold(x)
	if got := tape.ActivationBytes(); got != 0 {
		t.Fatalf("after Unhold of a released tensor: %d bytes, want 0", got)
	}
	y := tensor.New(10)
	tape.Hold(y)
	tape.Hold(y)
	tape.Unhold(y)
	if got := tape.ActivationBytes(); got != 40 {
		t.Fatalf("after two Holds and one Unhold: %d bytes, want 40", got)
	}
	tape.Unhold(y)
	if got := tape.ActivationBytes(); got != 0 {
		t.Fatalf("after the last Unhold: %d bytes, want 0", got)
	}
}
