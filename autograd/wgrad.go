package autograd

import (
	"context"
	"sync"

	"github.com/gotron/gotron/tensor"
)

// WeightGrads are the parameter-gradient work of one BackwardSplit: the
// "W" half of a backward pass split as zero-bubble pipeline schedules
// split it (Qi et al. 2024, arXiv 2401.10241), the input gradients ("B")
// having been computed already. Run does the work, in the order the
// unsplit Backward would have done it.
type WeightGrads struct {
	tape  *Tape // the pass's, whose error Run reports
	only  map[*Var]bool
	mu    sync.Mutex
	tasks []wTask
	ran   bool
}

// defers reports whether the split defers the gradient of the leaf v:
// every parameter's, or under BackwardSplitOnly the listed ones'. A nil
// w (no split) defers nothing.
func (w *WeightGrads) defers(v *Var) bool {
	return w != nil && v.param && (w.only == nil || w.only[v])
}

// wTask is one contribution to a parameter's gradient, and the Backward
// call it belongs to (whose bookkeeping decides when the parameter's
// hooks run); a task without a leaf is the tape's bookkeeping (a node's
// saved tensors leaving the activation count once its work has run).
type wTask struct {
	leaf *Var
	run  func()
	call *backwardCall
}

// backwardCall is one Backward call's per-leaf state: the float32 sums of
// 16-bit leaf gradients, and, under a split, the tasks still queued for
// each parameter and the parameters whose uses are all done (their hooks
// wait for their last task).
type backwardCall struct {
	leaves  leafGrads
	waiting map[*Var]int
	parked  map[*Var]bool
}

func newBackwardCall() *backwardCall {
	return &backwardCall{leaves: leafGrads{}, waiting: map[*Var]int{}, parked: map[*Var]bool{}}
}

// Len returns the number of queued contributions.
func (w *WeightGrads) Len() int {
	n := 0
	for _, task := range w.tasks {
		if task.leaf != nil {
			n++
		}
	}
	return n
}

// queued returns how many tasks the running split has queued (0 outside
// one).
func (t *Tape) queued() int {
	if t.wgrad == nil {
		return 0
	}
	t.wgrad.mu.Lock()
	defer t.wgrad.mu.Unlock()
	return len(t.wgrad.tasks)
}

// Run adds every queued contribution to its parameter's gradient, in
// order, and runs each parameter's hooks (under ctx) as its last
// contribution of the pass lands; it returns the tape's error (a hook's
// failure, say). It runs once; a second call does nothing.
func (w *WeightGrads) Run(ctx context.Context) error {
	if w.ran {
		return w.tape.Err()
	}
	w.ran = true
	for _, task := range w.tasks {
		task.run()
		if task.leaf == nil {
			continue // the tape's bookkeeping
		}
		c := task.call
		if c.waiting[task.leaf]--; c.waiting[task.leaf] == 0 && c.parked[task.leaf] {
			delete(c.parked, task.leaf)
			c.leaves.done(ctx, task.leaf)
		}
	}
	w.tasks = nil
	return w.tape.Err()
}

// queue appends a task for the leaf v of call, counting it as waiting.
// Functions may accumulate parameters' gradients from several goroutines
// (a MoE layer's experts): tasks of different parameters may then queue in
// any order, each parameter's own in its order.
func (w *WeightGrads) queue(v *Var, run func(), call *backwardCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tasks = append(w.tasks, wTask{leaf: v, run: run, call: call})
	if v != nil {
		call.waiting[v]++
	}
}

// BackwardSplit is Backward with the parameters' gradients split off:
// the input gradients are propagated now, while every contribution to the
// gradient of a parameter (a leaf marked with MarkParameter) — returned
// by a Function or accumulated by it through Ctx.AccumulateParam — is
// queued, in order, on the returned WeightGrads, and a parameter's hooks
// wait for its contributions to land. Other leaves (a recomputed region's
// inputs, say) get their gradients at once. Running the returned work
// gives every parameter exactly the gradient Backward would have given
// it, bit for bit, the additions being the same and in the same order.
//
// The tensors the queued work reads (a layer's input and output
// gradient) stay alive until it runs; the tape's activation memory counts
// what their nodes saved until then (their output gradients are not
// counted, as in an unsplit backward).
func BackwardSplit(t *Tape, out *Var, grad *tensor.Tensor) (*WeightGrads, error) {
	return backwardSplit(t, out, grad, &WeightGrads{tape: t})
}

// BackwardSplitOnly is BackwardSplit with only the listed parameters'
// gradients split off; the others' are added now, as Backward adds them.
// A pipeline's last stage defers its output layer's weight gradients so
// (defer_embedding_wgrad_compute). The listed parameters get, once the
// work has run, exactly Backward's gradients, bit for bit.
func BackwardSplitOnly(t *Tape, out *Var, grad *tensor.Tensor, params ...*Var) (*WeightGrads, error) {
	w := &WeightGrads{tape: t, only: map[*Var]bool{}}
	for _, p := range params {
		w.only[p] = true
	}
	return backwardSplit(t, out, grad, w)
}

func backwardSplit(t *Tape, out *Var, grad *tensor.Tensor, w *WeightGrads) (*WeightGrads, error) {
	outer := t.wgrad
	t.wgrad = w
	err := Backward(t, out, grad)
	t.wgrad = outer
	return w, err
}

// AccumulateParam has add accumulate one contribution into the gradient of
// the leaf v, now, or, when v is a parameter and the pass is split
// (BackwardSplit), as queued weight-gradient work. The Functions that
// accumulate their parameters' gradients directly call it (through
// nn.AccumulateGrad). A nil c adds at once.
func (c *Ctx) AccumulateParam(v *Var, add func()) {
	if c == nil || c.tape == nil || !c.tape.wgrad.defers(v) || c.tape.call == nil {
		add()
		return
	}
	c.tape.wgrad.queue(v, add, c.tape.call)
}

// addLeaf adds g, a gradient Backward computed for the leaf v, now or as
// queued work (AccumulateParam's rule).
func (t *Tape) addLeaf(call *backwardCall, v *Var, g *tensor.Tensor) {
	if !t.wgrad.defers(v) {
		call.leaves.add(v, g)
		return
	}
	t.wgrad.queue(v, func() { call.leaves.add(v, g) }, call)
}

// leafDone is called when every use of the leaf v in call has been
// walked: its hooks run now, or, with contributions still queued, when
// the last of them lands. Under a split a parameter's hooks always wait
// for the weight-gradient work, even when nothing was queued for it (an
// expert that got no tokens): they must run where the other parameters'
// run, after the schedule has left no_sync.
func (t *Tape) leafDone(call *backwardCall, v *Var) {
	if t.wgrad.defers(v) && call.waiting[v] == 0 {
		t.wgrad.queue(v, func() {}, call)
	}
	if call.waiting[v] > 0 {
		call.parked[v] = true
		return
	}
	call.leaves.done(t.Context(), v)
}
