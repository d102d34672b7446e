package autograd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
)

// probeFn records what its Ctx showed and can be told to fail.
type probeFn struct {
	forwards   *int
	recording  *bool
	ctx        **autograd.Ctx
	failFwd    error
	failBwd    error
	gradsCount int            // gradients to return; 0 means one per input
	gradShape  []int          // shape of the returned gradients; nil means dy's
	save       *tensor.Tensor // saved in Forward when set
}

func (f probeFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	if f.forwards != nil {
		*f.forwards++
	}
	if f.recording != nil {
		*f.recording = c.Recording()
	}
	if f.ctx != nil {
		*f.ctx = c
	}
	if f.failFwd != nil {
		return nil, f.failFwd
	}
	if f.save != nil {
		c.Save(f.save)
		c.State = "state"
	}
	return in[0].Clone(), nil
}

func (f probeFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	if f.failBwd != nil {
		return nil, f.failBwd
	}
	n := f.gradsCount
	if n == 0 {
		n = 1
	}
	out := make([]*tensor.Tensor, n)
	for i := range out {
		if f.gradShape != nil {
			out[i] = tensor.New(f.gradShape...)
		} else {
			out[i] = dy.Clone()
		}
	}
	return out, nil
}

func TestTapeBasics(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "rank0")
	tape := autograd.NewTape(ctx)
	if tape.Context() != ctx || tape.Workers() != 1 || !tape.Recording() {
		t.Fatalf("new tape: workers %d recording %v", tape.Workers(), tape.Recording())
	}
	tape.SetWorkers(3)
	if tape.Workers() != 3 {
		t.Fatalf("SetWorkers(3): %d", tape.Workers())
	}
	tape.SetWorkers(0)
	if tape.Workers() != 1 {
		t.Fatalf("SetWorkers(0): %d, want 1", tape.Workers())
	}
	var seen *autograd.Ctx
	x := autograd.NewLeaf(tensor.New(2), "x", true)
	autograd.Apply(tape, probeFn{ctx: &seen}, x)
	if seen.Context().Value(key{}) != "rank0" || seen.Tape() != tape {
		t.Fatal("Ctx does not expose the tape and its context")
	}
	if !seen.NeedsGrad(0) || seen.NeedsGrad(1) {
		t.Fatal("NeedsGrad is wrong for a one-input function")
	}
}

func TestNoGrad(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(1, 3), "x", true)
	var rec bool
	restoreOuter := tape.NoGrad()
	restoreInner := tape.NoGrad()
	y := autograd.Apply(tape, probeFn{recording: &rec}, x)
	if rec || y.RequiresGrad() || !y.IsLeaf() || tape.Recording() {
		t.Fatalf("under NoGrad: Ctx.Recording %v, output requires grad %v, leaf %v", rec, y.RequiresGrad(), y.IsLeaf())
	}
	restoreInner()
	if tape.Recording() {
		t.Fatal("restoring the inner NoGrad turned recording back on")
	}
	restoreOuter()
	if !tape.Recording() {
		t.Fatal("recording is still off after both NoGrads were restored")
	}
	y = autograd.Apply(tape, probeFn{recording: &rec}, x)
	if !rec || !y.RequiresGrad() || y.IsLeaf() {
		t.Fatal("recording did not resume")
	}
	// Recording tape, but no input requires grad: nothing is recorded.
	z := autograd.Apply(tape, probeFn{recording: &rec}, autograd.Const(tensor.New(2)))
	if rec || z.RequiresGrad() || !z.IsLeaf() {
		t.Fatal("an op on constants was recorded")
	}
}

func TestStickyForwardError(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(1, 3), "x", true)
	first := errors.New("all-reduce on group tp failed")
	forwards := 0
	y := autograd.Apply(tape, probeFn{failFwd: first, forwards: &forwards}, x)
	if y == nil || y.Value != nil {
		t.Fatal("a failed Apply must return a Var with a nil Value")
	}
	if !errors.Is(tape.Err(), first) {
		t.Fatalf("Err = %v, want the Function's error", tape.Err())
	}
	// Later operations are skipped and keep the first error.
	z := autograd.Apply(tape, probeFn{forwards: &forwards, failFwd: errors.New("second")}, x)
	autograd.Add(tape, y, z)
	if forwards != 1 {
		t.Fatalf("%d forwards ran; the ones after the error must be skipped", forwards)
	}
	tape.Fail(errors.New("third"))
	tape.Fail(nil)
	if !errors.Is(tape.Err(), first) {
		t.Fatalf("Err = %v, want the first error kept", tape.Err())
	}
	if err := autograd.Backward(tape, z, nil); !errors.Is(err, first) {
		t.Fatalf("Backward on a failed tape: %v", err)
	}
	tape.Reset()
	if tape.Err() != nil {
		t.Fatal("Reset did not clear the error")
	}
	w := autograd.Scale(tape, x, 2)
	if w.Value == nil || tape.Err() != nil {
		t.Fatal("the tape does not work after Reset")
	}
}

func TestNilInputValueFails(t *testing.T) {
	for _, recording := range []bool{true, false} {
		tape := autograd.NewTape(t.Context())
		if !recording {
			defer tape.NoGrad()()
		}
		autograd.Add(tape, autograd.Const(tensor.New(2)), &autograd.Var{})
		if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "input 1") {
			t.Fatalf("recording=%v: Apply with a nil input value: err = %v", recording, err)
		}
	}
}

func TestBackwardErrorSticks(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(1, 3), "x", true)
	boom := errors.New("reduce-scatter timed out")
	y := autograd.Sum(tape, autograd.Apply(tape, probeFn{failBwd: boom}, x))
	if err := autograd.Backward(tape, y, nil); !errors.Is(err, boom) {
		t.Fatalf("Backward = %v, want the Function's error", err)
	}
	if !errors.Is(tape.Err(), boom) {
		t.Fatalf("tape.Err = %v, want the backward error to stick", tape.Err())
	}
}

func TestBackwardRejectsBadGradients(t *testing.T) {
	cases := []struct {
		name string
		fn   probeFn
		in   func() *autograd.Var
		want string
	}{
		{"count", probeFn{gradsCount: 2}, func() *autograd.Var { return autograd.NewLeaf(tensor.New(3), "x", true) }, "returned 2 gradients for 1 inputs"},
		{"leaf shape", probeFn{gradShape: []int{4}}, func() *autograd.Var { return autograd.NewLeaf(tensor.New(3), "x", true) }, `leaf "x"`},
		{"node shape", probeFn{gradShape: []int{4}}, nil, "input has [3]"},
	}
	for _, c := range cases {
		tape := autograd.NewTape(t.Context())
		var in *autograd.Var
		if c.in != nil {
			in = c.in()
		} else {
			in = autograd.Scale(tape, autograd.NewLeaf(tensor.New(3), "x", true), 1)
		}
		y := autograd.Apply(tape, c.fn, in)
		if err := autograd.Backward(tape, y, tensor.New(3)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

func TestSavedTensorsReleasedAfterBackward(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(1, 3), "x", true)
	var c *autograd.Ctx
	y := autograd.Apply(tape, probeFn{ctx: &c, save: tensor.New(1000)}, x)
	if len(c.Saved()) != 1 || c.State != "state" {
		t.Fatal("Save/State did not keep the tensors for backward")
	}
	if err := autograd.Backward(tape, autograd.Sum(tape, y), nil); err != nil {
		t.Fatal(err)
	}
	if c.Saved() != nil || c.State != nil {
		t.Fatal("saved tensors and state survive Backward")
	}
}

func TestSecondBackwardOnTheSameGraphFails(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(1, 3), "x", true)
	h := autograd.Scale(tape, x, 2)
	y := autograd.Sum(tape, h)
	if err := autograd.Backward(tape, y, nil); err != nil {
		t.Fatal(err)
	}
	first := x.Grad.Clone()
	err := autograd.Backward(tape, y, nil)
	if err == nil || !strings.Contains(err.Error(), "already walked") {
		t.Fatalf("second Backward on the same graph: err = %v, want an error saying the graph was already walked", err)
	}
	if !sameFloats(x.Grad.Data(), first.Data()) {
		t.Fatal("the failed second Backward changed x.Grad")
	}
	if y.Grad != nil || h.Grad != nil {
		t.Fatal("the second Backward treated a consumed output as a leaf and gave it a gradient")
	}
}

func TestBackwardThroughAConsumedInteriorNodeFails(t *testing.T) {
	// Backward from h consumes h's graph; a later Backward from y, which was
	// built on h, must not silently stop at h.
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.Full(1, 3), "x", true)
	h := autograd.Scale(tape, x, 2)
	y := autograd.Sum(tape, autograd.Scale(tape, h, 3))
	if err := autograd.Backward(tape, h, tensor.Full(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := autograd.Backward(tape, y, nil); err == nil || !strings.Contains(err.Error(), "already walked") {
		t.Fatalf("Backward through a consumed node: err = %v", err)
	}
}

func TestVarMethods(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	x := autograd.NewLeaf(tensor.New(2, 3), "decoder.layers.0.weight", true)
	if !x.IsLeaf() || !x.RequiresGrad() || x.Name != "decoder.layers.0.weight" {
		t.Fatal("NewLeaf")
	}
	if s := x.Shape(); len(s) != 2 || s[0] != 2 || s[1] != 3 {
		t.Fatalf("Shape %v", s)
	}
	x.SetRequiresGrad(false)
	if x.RequiresGrad() {
		t.Fatal("SetRequiresGrad(false)")
	}
	x.SetRequiresGrad(true)
	y := autograd.Scale(tape, x, 2)
	d := y.Detach()
	if !d.IsLeaf() || d.RequiresGrad() || d.Value != y.Value {
		t.Fatal("Detach must share the value and cut the graph")
	}
	if c := autograd.Const(tensor.New(1)); c.RequiresGrad() || !c.IsLeaf() {
		t.Fatal("Const")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "non-leaf") {
			t.Fatalf("SetRequiresGrad on a non-leaf: recover() = %v", r)
		}
	}()
	y.SetRequiresGrad(false)
}

func TestFailFromManyGoroutines(t *testing.T) {
	// Hooks may fail the tape from other goroutines (a bucket's reduction);
	// exactly one of the errors is kept. Run with -race.
	tape := autograd.NewTape(t.Context())
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		errs[i] = fmt.Errorf("bucket %d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tape.Fail(errs[i])
			_ = tape.Err()
		}()
	}
	wg.Wait()
	got := tape.Err()
	found := false
	for _, e := range errs {
		found = found || got == e
	}
	if !found {
		t.Fatalf("Err = %v, want one of the goroutines' errors", got)
	}
}
