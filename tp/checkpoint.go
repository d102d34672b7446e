package tp

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// CheckpointFunc is a region of a model that activation checkpointing runs
// and later recomputes: it computes one output from args on the tape t it
// is given. It must record everything on t (not on a tape it captured), and
// draw random numbers only from the generators the checkpoint snapshots (the
// tracker's streams and the default generator), so that rerunning it
// reproduces its forward exactly.
type CheckpointFunc func(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error)

// CheckpointOptions configures Checkpoint.
type CheckpointOptions struct {
	// DistributeSavedActivations keeps only this rank's 1-D chunk of args[0]
	// between forward and backward: with n = args[0].Len(), rank r of Group
	// saves flat(args[0])[r·n/tp : (r+1)·n/tp] (SplitTensorInto1DEqualChunks),
	// and backward all-gathers the chunks (GatherSplit1DTensor) before
	// recomputing. n must be divisible by the group's size. The ranks of the
	// group must hold the same args[0] (activations replicated across the
	// tensor-parallel group), as in Megatron-Core.
	DistributeSavedActivations bool
	// Group is the tensor-parallel group the saved input is distributed
	// over; nil or a group of one rank distributes nothing.
	Group comm.Group
	// Tracker holds the named streams fn may draw from (dropout in a
	// tensor-parallel region); nil if fn draws from none.
	Tracker *RNGStatesTracker
	// Default is the rank's default generator (the one
	// ModelParallelManualSeed returns), if fn draws from it; may be nil.
	Default *rng.RNG
}

// Checkpoint runs fn(t, args) without keeping its intermediate activations
// and recomputes them in backward (Megatron-Core's tensor_parallel.checkpoint,
// docs/SEMANTICS.md § RNG streams and activation checkpointing). It returns
// fn's output as a node of t's graph whose only saved tensors are the args
// (or, with DistributeSavedActivations, this rank's 1-D chunk of args[0] and
// the other args).
//
// Forward:
//  1. Snapshot the states of opts.Default and of every stream of opts.Tracker.
//  2. Run fn on detached copies of the args, keeping nothing of what it
//     computes but its output value.
//  3. With DistributeSavedActivations, save only this rank's chunk of args[0].
//
// Backward, given dy = ∂L/∂out:
//  1. All-gather args[0] back to its shape if it was distributed.
//  2. Set the generators to the forward snapshot, rerun fn with recording on
//     fresh leaves sharing the args' values (requiring grad where the
//     checkpoint's inputs need it), then put back the generators' states of
//     before the rerun (fork semantics), so the streams end where
//     an uncheckpointed run leaves them.
//  3. Run autograd.Backward on the recomputed output with dy and return the
//     leaves' gradients. Parameters used inside fn accumulate their
//     gradients (and run their grad hooks) in this inner backward.
//
// Dropout and other random operations inside fn therefore draw the same
// masks in the recompute as in the forward, and losses and gradients are
// bitwise those of the same function without checkpointing.
//
// How "keeping nothing" is done: gotron's nn layers treat a tape that is
// not recording as evaluation (nn.Dropout is the identity under NoGrad), so
// running fn under t.NoGrad(), as the reference runs it without grad mode,
// would switch dropout off in forward but not in the recompute. Instead fn
// runs on a private recording tape that is dropped when fn returns: its
// intermediate tensors live only while fn runs, nothing inside fn is added
// to t's graph or to t.ActivationBytes(), and dropout stays on. When t is
// not recording (evaluation), Checkpoint simply returns fn(t, args).
//
// Departures from the reference, each deliberate:
//   - Parameters used inside fn receive gradients even when no argument
//     requires grad (the reference's checkpoint node is then not recorded
//     and they silently get none).
//   - With DistributeSavedActivations the caller's args[0] keeps its full
//     value (the reference swaps the caller's tensor for the chunk): only
//     the chunk is saved and accounted, and the whole tensor is freed when
//     the caller drops it, as the GPT's layer loop does. A caller that
//     still uses args[0] elsewhere is not broken.
//   - The reference refuses gradients taken by a functional .grad() call
//     ("Checkpointing is not compatible with .grad()"); gotron has only
//     autograd.Backward, so there is nothing to refuse.
//
// Errors (from fn, from the collective, or an indivisible args[0]) are
// recorded on t and the returned Var has a nil Value, as with
// autograd.Apply.
func Checkpoint(t *autograd.Tape, fn CheckpointFunc, opts CheckpointOptions, args ...*autograd.Var) *autograd.Var {
	if t.Err() != nil {
		return &autograd.Var{}
	}
	if !t.Recording() {
		return runPlain(t, fn, args, "checkpoint")
	}
	in := withAnchor(args)
	f := &checkpointFn{fn: fn, opts: opts, names: argNames(args), nargs: len(args), ninputs: len(in)}
	return autograd.Apply(t, f, in...)
}

// checkpointFn is the checkpoint's node: inputs are the args (plus the
// anchor, see withAnchor), output fn's output.
type checkpointFn struct {
	fn      CheckpointFunc
	opts    CheckpointOptions
	names   []string
	nargs   int
	ninputs int // nargs, or nargs+1 with the anchor
}

// checkpointState is what a checkpoint node keeps besides its saved args.
type checkpointState struct {
	rng         rngSnapshot
	distributed bool
	shape0      []int // args[0]'s shape when distributed
}

func (f *checkpointFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	vals := in[:f.nargs]
	st := &checkpointState{}
	ws := worldSize(f.opts.Group)
	if f.opts.DistributeSavedActivations && ws > 1 {
		if len(vals) == 0 {
			return nil, fmt.Errorf("tp: checkpoint: DistributeSavedActivations distributes args[0], but no args were given")
		}
		if n := vals[0].Len(); n%ws != 0 {
			return nil, fmt.Errorf("tp: checkpoint: DistributeSavedActivations splits args[0] %v (%d elements) into %d equal chunks over %s, but %d is not divisible by %d; disable it for this input or make its size a multiple of the tensor-parallel size", vals[0].Shape(), n, ws, groupName(f.opts.Group), n, ws)
		}
		st.distributed = true
		st.shape0 = append([]int(nil), vals[0].Shape()...)
	}
	st.rng = takeRNG(f.opts.Default, f.opts.Tracker)
	y, err := runDetached(c.Tape(), f.fn, vals, f.names, "checkpoint")
	if err != nil {
		return nil, err
	}
	saved := append([]*tensor.Tensor(nil), vals...)
	if st.distributed {
		saved[0] = SplitTensorInto1DEqualChunks(vals[0], f.opts.Group, true)
	}
	c.Save(saved...)
	c.State = st
	return y, nil
}

func (f *checkpointFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	st := c.State.(*checkpointState)
	vals := append([]*tensor.Tensor(nil), c.Saved()...)
	if st.distributed {
		full, err := GatherSplit1DTensor(c.Context(), vals[0], f.opts.Group)
		if err != nil {
			return nil, fmt.Errorf("tp: checkpoint backward: gathering the distributed args[0]: %w", err)
		}
		vals[0] = full.View(st.shape0...)
	}
	needs := make([]bool, len(vals))
	for i := range needs {
		needs[i] = c.NeedsGrad(i)
	}
	tape := recordingTape(c.Tape())
	out, leaves, err := recompute(tape, f.fn, vals, needs, f.names, f.opts.Default, f.opts.Tracker, st.rng)
	if err != nil {
		return nil, err
	}
	if !tensor.SameShape(out.Value, dy) {
		return nil, fmt.Errorf("tp: checkpoint backward: the recomputed output has shape %v, the forward's had %v; the checkpointed function must compute the same thing when rerun", out.Value.Shape(), dy.Shape())
	}
	if out.RequiresGrad() {
		if err := autograd.Backward(tape, out, dy); err != nil {
			return nil, err
		}
	}
	grads := make([]*tensor.Tensor, f.ninputs) // the anchor's stays nil
	for i := range f.nargs {
		if needs[i] {
			grads[i] = leaves[i].Grad
		}
	}
	return grads, nil
}

// CheckpointWithoutOutput checkpoints a region and also lets its output be
// discarded once the layers that consume it have saved it, recomputing the
// output in backward just before those consumers need it (Megatron-Core's
// CheckpointWithoutOutput, docs/SEMANTICS.md § RNG streams and activation
// checkpointing). Typical use, a layer norm whose output only feeds a linear
// layer:
//
//	ck := &tp.CheckpointWithoutOutput{Tracker: tr, Default: def}
//	ln := ck.Checkpoint(t, layerNorm, x)   // ln: [s, b, h]
//	y := nn.Linear(t, ln, w, nil)           // saves ln for its backward
//	y = ck.DiscardOutputAndRegisterRecompute(t, y)
//	... continue from y ...
//
// The zero value is ready to use; set Tracker and Default to the generators
// the region draws from. An object holds the last checkpoint it made: call
// Checkpoint, then DiscardOutputAndRegisterRecompute for that checkpoint,
// before the next Checkpoint on the same object (earlier checkpoints keep
// working).
//
// Storage: as in the reference, discarding frees the output's storage
// (autograd.Tape.Release: the tensor and every view of it lose their
// elements, and the tape's activation bytes drop by its size), and the
// recompute gives the same tensor a new allocation and writes the
// recomputed values into it (Tape.Restore), so every Function that saved it
// or a view of it sees them. A use of the output between the discard and
// the recompute panics (tensor: use of released storage): a programmer bug.
type CheckpointWithoutOutput struct {
	// Tracker holds the named streams the region draws from; may be nil.
	Tracker *RNGStatesTracker
	// Default is the rank's default generator, if the region draws from it.
	Default *rng.RNG

	last *cwoCall
}

// cwoCall is one checkpointed call of a CheckpointWithoutOutput.
type cwoCall struct {
	fn      CheckpointFunc
	names   []string
	nargs   int
	ninputs int // nargs, or nargs+1 with the anchor
	def     *rng.RNG
	tracker *RNGStatesTracker
	rng     rngSnapshot
	ctx     *autograd.Ctx // the checkpoint node's, holding the saved args
	needs   []bool
	output  *tensor.Tensor
	aliases bool // the output shares storage with an input: never discarded
	discard bool
	hooked  bool
	tape    *autograd.Tape // the tape the recomputed graph is recorded on
	// releasedOn is the tape the output was released on (its accounting
	// takes the bytes back at the recompute).
	releasedOn *autograd.Tape
	out        *autograd.Var // the recomputed output
	leaves     []*autograd.Var
	finished   bool
}

// Checkpoint runs fn(t, args) keeping none of its intermediate activations,
// as Checkpoint does (same RNG snapshot, same private recording tape), and
// returns its output as a node of t's graph. The output may then be
// discarded with DiscardOutputAndRegisterRecompute. If it is not, backward
// through the output recomputes fn there, as the plain Checkpoint does.
// When t is not recording it returns fn(t, args).
func (k *CheckpointWithoutOutput) Checkpoint(t *autograd.Tape, fn CheckpointFunc, args ...*autograd.Var) *autograd.Var {
	k.last = nil
	if t.Err() != nil {
		return &autograd.Var{}
	}
	if !t.Recording() {
		return runPlain(t, fn, args, "CheckpointWithoutOutput")
	}
	in := withAnchor(args)
	call := &cwoCall{fn: fn, names: argNames(args), nargs: len(args), ninputs: len(in), def: k.Default, tracker: k.Tracker}
	out := autograd.Apply(t, cwoFn{call}, in...)
	if out.Value != nil {
		k.last = call
	}
	return out
}

// DiscardOutputAndRegisterRecompute discards the output of the last
// Checkpoint call and arranges for it to be recomputed when the gradient
// reaches hook. It returns hook passed through an identity node whose
// backward runs the recompute; the caller continues the forward from the
// returned Var instead of hook (gotron has no gradient hooks on non-leaf
// variables, so the hook is a node on hook's path).
//
// As in the reference, the caller chooses hook so that its gradient is
// computed before any backward that uses the discarded output: typically
// the output of the layer that consumed (and saved) the checkpoint's output.
// hook must require grad. An output that shares storage with one of the
// checkpoint's inputs is kept, since the recompute needs the inputs (the
// reference has an option to retain such outputs; gotron detects them).
// Without a Checkpoint call on a recording tape before it, or called twice,
// it records an error on t.
func (k *CheckpointWithoutOutput) DiscardOutputAndRegisterRecompute(t *autograd.Tape, hook *autograd.Var) *autograd.Var {
	if t.Err() != nil {
		return &autograd.Var{}
	}
	if !t.Recording() {
		return hook // evaluation: nothing was checkpointed, nothing to recompute
	}
	call := k.last
	switch {
	case call == nil:
		t.Fail(fmt.Errorf("tp: CheckpointWithoutOutput: DiscardOutputAndRegisterRecompute without a checkpoint: call Checkpoint on a recording tape first"))
		return &autograd.Var{}
	case call.hooked:
		t.Fail(fmt.Errorf("tp: CheckpointWithoutOutput: the output was already discarded; call DiscardOutputAndRegisterRecompute once per Checkpoint"))
		return &autograd.Var{}
	case hook == nil || hook.Value == nil:
		t.Fail(fmt.Errorf("tp: CheckpointWithoutOutput: DiscardOutputAndRegisterRecompute needs a hook variable with a value"))
		return &autograd.Var{}
	case !hook.RequiresGrad():
		t.Fail(fmt.Errorf("tp: CheckpointWithoutOutput: the hook variable %q does not require grad, so no gradient would reach it to trigger the recompute; pass a variable on the discarded output's gradient path", hook.Name))
		return &autograd.Var{}
	}
	call.hooked = true
	if !call.aliases {
		t.Release(call.output)
		call.discard = true
		call.releasedOn = t
	}
	return autograd.Apply(t, recomputeHookFn{call}, hook)
}

// cwoFn is the node of a CheckpointWithoutOutput: inputs the args (plus
// the anchor), output fn's output.
type cwoFn struct{ call *cwoCall }

func (f cwoFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	k := f.call
	vals := in[:k.nargs]
	k.rng = takeRNG(k.def, k.tracker)
	y, err := runDetached(c.Tape(), k.fn, vals, k.names, "CheckpointWithoutOutput")
	if err != nil {
		return nil, err
	}
	c.Save(vals...)
	k.ctx = c
	k.needs = make([]bool, k.nargs)
	for i := range k.needs {
		k.needs[i] = c.NeedsGrad(i)
	}
	k.output = y
	yid, _ := y.Storage()
	for _, v := range vals {
		if id, _ := v.Storage(); id != 0 && id == yid {
			k.aliases = true
		}
	}
	return y, nil
}

func (f cwoFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	k := f.call
	if err := k.recompute(c.Tape()); err != nil {
		return nil, err
	}
	if k.out.RequiresGrad() {
		if err := autograd.Backward(k.tape, k.out, dy); err != nil {
			return nil, err
		}
	}
	grads := make([]*tensor.Tensor, k.ninputs)
	for i := range k.nargs {
		if k.needs[i] {
			grads[i] = k.leaves[i].Grad
		}
	}
	k.out, k.leaves, k.ctx, k.output, k.finished = nil, nil, nil, nil, true
	return grads, nil
}

// recompute reruns the call's function under its forward RNG snapshot on
// the saved args, once, and writes the result back into the original output
// tensor if it was discarded.
func (k *cwoCall) recompute(t *autograd.Tape) error {
	if k.out != nil {
		return nil
	}
	if k.finished || k.ctx == nil {
		return fmt.Errorf("tp: CheckpointWithoutOutput: recompute after the checkpoint's backward already ran; a checkpoint's graph can be walked once")
	}
	vals := k.ctx.Saved()[:k.nargs]
	k.tape = recordingTape(t)
	out, leaves, err := recompute(k.tape, k.fn, vals, k.needs, k.names, k.def, k.tracker, k.rng)
	if err != nil {
		return err
	}
	if !tensor.SameShape(out.Value, k.output) {
		return fmt.Errorf("tp: CheckpointWithoutOutput: the recomputed output has shape %v, the forward's had %v; the checkpointed function must compute the same thing when rerun", out.Value.Shape(), k.output.Shape())
	}
	if k.discard {
		k.releasedOn.Restore(k.output)
		k.output.CopyFrom(out.Value)
	}
	k.out, k.leaves = out, leaves
	return nil
}

// recomputeHookFn is the identity; its backward recomputes the discarded
// output before the gradient flows on to the output's consumers.
type recomputeHookFn struct{ call *cwoCall }

func (recomputeHookFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return in[0], nil
}

func (f recomputeHookFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := f.call.recompute(c.Tape()); err != nil {
		return nil, err
	}
	return []*tensor.Tensor{dy}, nil
}

// rngSnapshot is the state of every generator a checkpointed region may
// draw from.
type rngSnapshot struct {
	def     rng.State
	tracked map[string]rng.State
}

// takeRNG snapshots def (if not nil) and every stream of tr (if not nil).
func takeRNG(def *rng.RNG, tr *RNGStatesTracker) rngSnapshot {
	var s rngSnapshot
	if def != nil {
		s.def = def.State()
	}
	if tr != nil {
		s.tracked = tr.GetStates()
	}
	return s
}

// restore sets def and tr to the snapshot.
func (s rngSnapshot) restore(def *rng.RNG, tr *RNGStatesTracker) error {
	if def != nil {
		def.SetState(s.def)
	}
	if tr != nil {
		return tr.SetStates(s.tracked)
	}
	return nil
}

// recompute reruns fn with recording on tape, on fresh leaves holding vals
// (leaf i requires grad when needs[i]), with the generators set to snap
// and put back afterwards (fork semantics, docs/SEMANTICS.md § RNG streams
// and activation checkpointing).
func recompute(tape *autograd.Tape, fn CheckpointFunc, vals []*tensor.Tensor, needs []bool, names []string,
	def *rng.RNG, tr *RNGStatesTracker, snap rngSnapshot) (*autograd.Var, []*autograd.Var, error) {
	leaves := make([]*autograd.Var, len(vals))
	for i, v := range vals {
		leaves[i] = autograd.NewLeaf(v, names[i], needs[i])
	}
	cur := takeRNG(def, tr)
	if err := snap.restore(def, tr); err != nil {
		return nil, nil, err
	}
	out, err := fn(tape, leaves)
	if rerr := cur.restore(def, tr); err == nil {
		err = rerr
	}
	if err == nil {
		err = tape.Err()
	}
	if err == nil {
		err = checkOutput(out, "checkpoint recompute")
	}
	if err != nil {
		return nil, nil, err
	}
	return out, leaves, nil
}

// runDetached runs fn on a private recording tape (same context and
// workers as t) over leaves that hold vals and do not require grad, and
// returns the output's value; the tape, and every tensor fn saved on it, is
// dropped on return.
func runDetached(t *autograd.Tape, fn CheckpointFunc, vals []*tensor.Tensor, names []string, what string) (*tensor.Tensor, error) {
	scratch := autograd.NewTape(t.Context())
	scratch.SetWorkers(t.Workers())
	args := make([]*autograd.Var, len(vals))
	for i, v := range vals {
		args[i] = autograd.NewLeaf(v, names[i], false)
	}
	out, err := fn(scratch, args)
	if err == nil {
		err = scratch.Err()
	}
	if err == nil {
		err = checkOutput(out, what)
	}
	if err != nil {
		return nil, err
	}
	return out.Value, nil
}

// recordingTape returns t if it records, else a recording tape with t's
// context and workers: the recompute always records, whatever t's no-grad
// depth.
func recordingTape(t *autograd.Tape) *autograd.Tape {
	if t.Recording() {
		return t
	}
	r := autograd.NewTape(t.Context())
	r.SetWorkers(t.Workers())
	return r
}

// runPlain runs fn on t without checkpointing (evaluation), recording an
// error on t when fn fails or returns no value.
func runPlain(t *autograd.Tape, fn CheckpointFunc, args []*autograd.Var, what string) *autograd.Var {
	out, err := fn(t, args)
	if err == nil {
		err = checkOutput(out, what)
	}
	if err != nil {
		t.Fail(err)
		return &autograd.Var{}
	}
	return out
}

func checkOutput(out *autograd.Var, what string) error {
	if out == nil || out.Value == nil {
		return fmt.Errorf("tp: %s: the checkpointed function returned no output value", what)
	}
	return nil
}

func argNames(args []*autograd.Var) []string {
	names := make([]string, len(args))
	for i, a := range args {
		if a != nil {
			names[i] = a.Name
		}
	}
	return names
}

// withAnchor returns args, plus a one-element leaf requiring grad when no
// arg requires grad: the checkpoint node is then still recorded, so
// parameters used inside the region get their gradients. The anchor's
// gradient is always nil.
func withAnchor(args []*autograd.Var) []*autograd.Var {
	for _, a := range args {
		if a != nil && a.RequiresGrad() {
			return args
		}
	}
	return append(append([]*autograd.Var(nil), args...), autograd.NewLeaf(tensor.New(1), "checkpoint-anchor", true))
}
