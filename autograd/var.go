package autograd

import (
	"context"

	"github.com/gotron/gotron/tensor"
)

// Var is a tensor in the autograd graph: a leaf (a parameter or an input)
// or the output of a Function.
type Var struct {
	// Value is the forward value.
	Value *tensor.Tensor
	// Grad is the accumulated gradient of a leaf that requires grad. Backward
	// adds into it when it is non-nil (a view into a contiguous gradient
	// buffer, say) and allocates it otherwise.
	Grad *tensor.Tensor
	// Name is the variable's name (Megatron's parameter name for parameters).
	Name string

	requiresGrad bool
	param        bool
	node         *node
	hooks        []func(context.Context, *Var)
}

// MarkParameter marks a leaf as a model parameter: its value is a weight,
// not an activation, so the tape's activation-memory accounting does not
// count it when a Function saves it (frozen or not). nn.NewParameter marks
// its parameters.
func (v *Var) MarkParameter() { v.param = true }

// IsParameter reports whether v was marked with MarkParameter.
func (v *Var) IsParameter() bool { return v.param }

// NewLeaf returns a leaf variable; requiresGrad says whether Backward
// accumulates its gradient.
func NewLeaf(v *tensor.Tensor, name string, requiresGrad bool) *Var {
	return &Var{Value: v, Name: name, requiresGrad: requiresGrad}
}

// Const returns a leaf that does not require grad.
func Const(v *tensor.Tensor) *Var { return &Var{Value: v} }

// RequiresGrad reports whether gradients flow to v.
func (v *Var) RequiresGrad() bool { return v.requiresGrad }

// SetRequiresGrad sets whether a leaf's gradient is accumulated. It panics
// on a non-leaf.
func (v *Var) SetRequiresGrad(b bool) {
	if v.node != nil {
		panic("autograd: SetRequiresGrad on a non-leaf variable " + v.Name)
	}
	v.requiresGrad = b
}

// IsLeaf reports whether v was not produced by a recorded Function.
func (v *Var) IsLeaf() bool { return v.node == nil }

// AddGradHook registers fn to run when a Backward pass has accumulated all
// of this leaf's gradient contributions for that pass (Megatron's
// grad-accumulation hook, which DDP uses to start a bucket's reduction).
// fn gets the context the pass runs under (the tape's), for the work it
// starts.
func (v *Var) AddGradHook(fn func(ctx context.Context, v *Var)) { v.hooks = append(v.hooks, fn) }

// Detach returns a leaf sharing v's value, cut from the graph.
func (v *Var) Detach() *Var { return &Var{Value: v.Value, Name: v.Name} }

// Shape returns the shape of v's value.
func (v *Var) Shape() []int { return v.Value.Shape() }
