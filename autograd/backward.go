package autograd

import (
	"context"
	"fmt"
	"slices"

	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Backward propagates grad, the gradient of some scalar with respect to out,
// through the graph that produced out. A nil grad means ones (out must then
// hold one element). Leaf gradients are accumulated into Var.Grad; each
// leaf's hooks run as soon as all of its contributions in this pass have
// been added. A bfloat16 or float16 Grad receives the float32 sum of the
// pass's contributions with one rounding per element (leafGrads). The graph
// is consumed: saved tensors are released as each node finishes, so a graph
// can be walked once.
//
// Backward returns the tape's error, if any (a failed collective inside a
// Function's backward, say).
func Backward(t *Tape, out *Var, grad *tensor.Tensor) error {
	if err := t.Err(); err != nil {
		return err
	}
	if grad == nil {
		if out.Value.Len() != 1 {
			return fmt.Errorf("autograd: Backward without a gradient needs a scalar output, got shape %v", out.Value.Shape())
		}
		grad = tensor.Full(1, out.Value.Shape()...)
	}
	if !tensor.SameShape(grad, out.Value) {
		return fmt.Errorf("autograd: Backward gradient shape %v does not match output shape %v", grad.Shape(), out.Value.Shape())
	}
	call := newBackwardCall()
	outer := t.call
	t.call = call // AccumulateParam's, for the Functions' backward below
	defer func() { t.call = outer }()
	if out.node == nil {
		if out.requiresGrad {
			t.addLeaf(call, out, grad)
			t.leafDone(call, out)
		}
		return nil
	}
	order, leafUses := topoOrder(out.node)
	pending := map[*node]*pendingGrad{out.node: {g: grad}}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		pg := pending[n]
		delete(pending, n)
		if pg == nil {
			// Nothing flowed here (every path carried a nil gradient): the
			// leaves below still count this use as done.
			for _, in := range n.inputs {
				if in.leaf != nil {
					if leafUses[in.leaf]--; leafUses[in.leaf] == 0 {
						t.leafDone(call, in.leaf)
					}
				}
			}
			release(t, n)
			continue
		}
		fn, inputs, nctx := n.fn, n.inputs, n.ctx
		queued := t.queued()
		grads, err := fn.Backward(nctx, pg.g.Contiguous())
		if t.queued() > queued {
			// Its weight-gradient work still reads what it saved: the
			// tape counts it until that work has run.
			t.wgrad.queue(nil, func() { t.mem.forget(nctx) }, nil)
			releaseKeepingMemory(n)
		} else {
			release(t, n)
		}
		if err != nil {
			t.Fail(err)
			return t.Err()
		}
		if err := t.Err(); err != nil {
			return err
		}
		if len(grads) != len(inputs) {
			return fmt.Errorf("autograd: %T.Backward returned %d gradients for %d inputs", fn, len(grads), len(inputs))
		}
		for j, in := range inputs {
			g := grads[j]
			if in.node != nil {
				if g != nil {
					if !slices.Equal(g.Shape(), in.shape) {
						return fmt.Errorf("autograd: %T.Backward gradient %d has shape %v, input has %v", fn, j, g.Shape(), in.shape)
					}
					pending[in.node] = pending[in.node].add(t, g)
				}
				continue
			}
			leaf := in.leaf
			if leaf == nil {
				continue
			}
			if g != nil {
				if !slices.Equal(g.Shape(), in.shape) {
					return fmt.Errorf("autograd: %T.Backward gradient %d has shape %v, leaf %q has %v", fn, j, g.Shape(), leaf.Name, in.shape)
				}
				t.addLeaf(call, leaf, g)
			}
			leafUses[leaf]--
			if leafUses[leaf] == 0 {
				t.leafDone(call, leaf)
			}
		}
	}
	return t.Err()
}

// pendingGrad is a gradient being summed for a node. owned says whether
// the engine allocated g (and so may add into it in place).
type pendingGrad struct {
	g     *tensor.Tensor
	owned bool
}

func (p *pendingGrad) add(t *Tape, g *tensor.Tensor) *pendingGrad {
	if p == nil {
		return &pendingGrad{g: g}
	}
	src := g.Contiguous().Data()
	if !p.owned { // the first sum goes to a new tensor: p.g may be another's
		a := p.g.Contiguous().Data()
		p.g, p.owned = tensor.Empty(p.g.Shape()...), true
		dst := p.g.Data()
		kernels.ParallelFor(len(dst), elementWorkers(t, len(dst)), func(lo, hi int) {
			kernels.Add(dst[lo:hi], a[lo:hi], src[lo:hi])
		})
		return p
	}
	dst := p.g.Data()
	kernels.ParallelFor(len(dst), elementWorkers(t, len(dst)), func(lo, hi int) {
		kernels.AddInto(dst[lo:hi], src[lo:hi])
	})
	return p
}

func runHooks(ctx context.Context, v *Var) {
	for _, h := range v.hooks {
		h(ctx, v)
	}
}

func release(t *Tape, n *node) {
	t.mem.forget(n.ctx)
	releaseKeepingMemory(n)
}

// releaseKeepingMemory is release without the activation count: the
// node's saved tensors stay counted until its queued weight-gradient work
// has run (BackwardSplit).
func releaseKeepingMemory(n *node) {
	n.ctx.saved = nil
	n.ctx.State = nil
	// The output Var keeps pointing at its released node (not nil, which
	// would make it look like a leaf), so a later walk through it meets
	// releasedFunction and fails instead of silently stopping there.
	n.fn = releasedFunction{}
	n.inputs = nil
}

// releasedFunction stands in for a node's Function once backward has run,
// so a second walk fails clearly instead of using freed state.
type releasedFunction struct{}

func (releasedFunction) Forward(*Ctx, ...*tensor.Tensor) (*tensor.Tensor, error) {
	return nil, fmt.Errorf("autograd: forward of a released node")
}

func (releasedFunction) Backward(*Ctx, *tensor.Tensor) ([]*tensor.Tensor, error) {
	return nil, fmt.Errorf("autograd: backward through a graph that was already walked")
}

// topoOrder returns the nodes reachable from root, each after all of its
// inputs' nodes (so walking it backwards visits a node only after every
// consumer), and how many times each leaf requiring grad is used.
func topoOrder(root *node) ([]*node, map[*Var]int) {
	var order []*node
	seen := map[*node]bool{}
	leafUses := map[*Var]int{}
	type frame struct {
		n    *node
		next int
	}
	stack := []frame{{n: root}}
	seen[root] = true
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next < len(f.n.inputs) {
			in := f.n.inputs[f.next]
			f.next++
			if in.node == nil {
				if in.leaf != nil {
					leafUses[in.leaf]++
				}
				continue
			}
			if !seen[in.node] {
				seen[in.node] = true
				stack = append(stack, frame{n: in.node})
			}
			continue
		}
		order = append(order, f.n)
		stack = stack[:len(stack)-1]
	}
	return order, leafUses
}
