package autograd

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/tensor"
)

// Function is a differentiable operation with a Go forward and backward.
//
// Forward computes the output from the input values and may Save tensors on
// c for backward. Backward receives the gradient of the output and returns
// one gradient per input, in order; it may return nil for an input whose
// gradient is not needed (c.NeedsGrad(i) is false) or is zero. Returned
// gradients must not be modified by the Function afterwards; the engine
// may keep them.
type Function interface {
	Forward(c *Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error)
	Backward(c *Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error)
}

// Ctx is what a Function sees of its node: saved tensors, which inputs need
// gradients, and the rank's context.
type Ctx struct {
	tape      *Tape
	needsGrad []bool
	saved     []*tensor.Tensor
	// State holds any other value a Function keeps between forward and
	// backward (index slices, masks, RNG states). Its size counts toward
	// the tape's activation memory for the common slice types, a
	// *tensor.Tensor, or a StateSizer.
	State any

	stateBytes int64        // State's size as accounted at record time
	counted    []savedBytes // the saved storages accounted at record time
}

// Context returns the rank's context, for collectives.
func (c *Ctx) Context() context.Context { return c.tape.ctx }

// Tape returns the tape the Function runs on.
func (c *Ctx) Tape() *Tape { return c.tape }

// Pass identifies the Backward (or BackwardSplit) call running the
// Function's backward: comparable, equal for the Functions of one call and
// distinct between calls; nil outside a backward. A parameter's hooks run
// once per call that reached it, in the order of the calls, so an owner of
// parameters can tell how many passes it still waits for (dp.FSDP under a
// split backward, whose weight gradients land after later passes began).
func (c *Ctx) Pass() any {
	if c.tape.call == nil {
		return nil
	}
	return c.tape.call
}

// NeedsGrad reports whether input i needs a gradient.
func (c *Ctx) NeedsGrad(i int) bool { return i < len(c.needsGrad) && c.needsGrad[i] }

// Recording reports whether the forward is being recorded for backward;
// a Function may skip saving tensors when it is not.
func (c *Ctx) Recording() bool { return c.needsGrad != nil }

// Save keeps tensors for backward.
func (c *Ctx) Save(ts ...*tensor.Tensor) { c.saved = append(c.saved, ts...) }

// Saved returns the tensors kept by Save, in order.
func (c *Ctx) Saved() []*tensor.Tensor { return c.saved }

// node is a recorded application of a Function.
type node struct {
	fn     Function
	ctx    *Ctx
	inputs []edge
}

// edge links a node to one of its inputs: the node that produced an
// intermediate value, or a leaf that requires grad. The graph keeps no
// input values (only their shapes), so an intermediate tensor is freed as
// soon as neither the caller nor a Function's saved tensors hold it — as in
// PyTorch, where the graph holds nodes, not tensors. An input that neither
// requires grad nor comes from a recorded node has neither set.
type edge struct {
	node  *node
	leaf  *Var
	shape []int
}

// edges returns the graph's links to in.
func edges(in []*Var) []edge {
	es := make([]edge, len(in))
	for i, v := range in {
		es[i].shape = v.Value.Shape() // tensors never change their shape in place
		switch {
		case v.node != nil:
			es[i].node = v.node
		case v.requiresGrad:
			es[i].leaf = v
		}
	}
	return es
}

// Apply runs f on the inputs' values and returns its output. The
// application is recorded for backward when the tape is recording and some
// input requires grad. If the tape already holds an error, or f fails, the
// tape keeps the (first) error and the returned Var has a nil Value; callers
// check Tape.Err once at the end.
func Apply(t *Tape, f Function, in ...*Var) *Var {
	if t.Err() != nil {
		return &Var{}
	}
	vals := make([]*tensor.Tensor, len(in))
	record := false
	var needs []bool
	if t.Recording() {
		needs = make([]bool, len(in))
		for i, v := range in {
			if v.Value == nil {
				t.Fail(fmt.Errorf("autograd: input %d of %T has no value", i, f))
				return &Var{}
			}
			needs[i] = v.requiresGrad
			record = record || v.requiresGrad
		}
	}
	for i, v := range in {
		if v.Value == nil {
			t.Fail(fmt.Errorf("autograd: input %d of %T has no value", i, f))
			return &Var{}
		}
		vals[i] = v.Value
	}
	if !record {
		needs = nil
	}
	c := &Ctx{tape: t, needsGrad: needs}
	y, err := f.Forward(c, vals...)
	if err != nil {
		t.Fail(err)
		return &Var{}
	}
	out := &Var{Value: y}
	if record {
		out.requiresGrad = true
		out.node = &node{fn: f, ctx: c, inputs: edges(in)}
		t.mem.account(c, in)
	}
	return out
}
