package pp

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/pp/p2p"
	"github.com/gotron/gotron/tensor"
)

// Chunk is a model chunk as the schedules use it (Megatron's
// set_input_tensor on a model chunk).
type Chunk interface {
	SetInputTensor(x *autograd.Var)
}

// P2P is the pipeline communicator the executor drives, with the shape
// of the tensors it receives: activations and their gradients are
// [s/cp (/tp under sequence parallelism), b, h]; with variable sequence
// lengths the communicator takes each shape from the sender instead.
// Chunks whose boundaries carry other shapes say so in InputShapes and
// OutputShapes.
type P2P struct {
	Comm *p2p.Communicator
	// GradComm, when set, carries the gradients and Comm the activations
	// only: a second communicator over a second group of the same ranks,
	// whose messages never meet Comm's. comm matches messages by the pair
	// of ranks alone, so a schedule that sends both kinds both ways
	// between two ranks (the V placement's, ZB-V) needs it.
	GradComm *p2p.Communicator
	Shape    []int
	// InputShapes[v] and OutputShapes[v], when present and not nil, are
	// the shapes of chunk v's input activation (and its gradient) and of
	// its output (and the gradient received for it) instead of Shape:
	// after a standalone MTP stage the pipeline carries the depths'
	// hidden states beside the main ones.
	InputShapes, OutputShapes [][]int
}

// shapeOf is the shape of the tensor op receives: its chunk's input for
// an activation, its output for a gradient.
func (p P2P) shapeOf(op Op) []int {
	shapes := p.OutputShapes
	if op.Dir == RecvPrev {
		shapes = p.InputShapes
	}
	if op.Chunk < len(shapes) && shapes[op.Chunk] != nil {
		return shapes[op.Chunk]
	}
	return p.Shape
}

// Args are what one call of a forward-backward function needs (the
// reference's keyword arguments of get_forward_backward_func()'s result).
type Args struct {
	// Config is the model's configuration: the pipeline sizes and P2P
	// settings, the callbacks (no_sync_func, grad_sync_func,
	// param_sync_func, finalize_model_grads_func, grad_scale_func),
	// calculate_per_token_loss, num_microbatches_with_partial_activation_checkpoints.
	Config config.TransformerConfig
	// Rank is this rank's pipeline rank.
	Rank int
	// Tape records the forward passes and runs the backward ones.
	Tape *autograd.Tape
	// Chunks are this rank's model chunks, V of them.
	Chunks []Chunk
	// ForwardStep runs a forward step.
	ForwardStep ForwardStepFunc
	// P2P is the pipeline communicator (unused without pipelining).
	P2P P2P
	// NumMicrobatches is M.
	NumMicrobatches int
	// ForwardOnly runs the forward passes only (evaluation).
	ForwardOnly bool
	// CollectNonLossData hands the last stage's raw outputs to the store
	// instead of losses.
	CollectNonLossData bool
	// FirstValStep, when set with ForwardOnly, marks the first validation
	// step (check_first_val_step).
	FirstValStep *bool
	// ForceAllReduce is passed to finalize_model_grads.
	ForceAllReduce bool
	// ContextParallelSize scales a 2-tuple loss (cp_group_size).
	ContextParallelSize int
	// Trace, when set, receives the start and end of every action.
	Trace func(Event)
	// Schedule names a schedule other than the reference's choice
	// (Config.Schedule: ScheduleZBH1), "" for the reference's.
	Schedule string
	// OutputWeight is the last stage's output-layer weight (tied to the
	// embedding or not), whose weight gradients
	// defer_embedding_wgrad_compute defers (Config's
	// DeferEmbeddingWgradCompute); nil elsewhere.
	OutputWeight *autograd.Var
}

// Event is one executed action, for timelines (gotron train
// --profile-schedule).
type Event struct {
	Step       int
	Action     Action
	Start, End time.Time
}

// Result is what a forward-backward call returns.
type Result struct {
	// Store is forward_data_store: on the last stage each microbatch's
	// Loss.Reported (or, with CollectNonLossData, the raw output), in
	// microbatch order; empty elsewhere.
	Store []any
	// NumTokens is the sum of the microbatches' token counts on the last
	// stage (0 elsewhere).
	NumTokens int64
}

// key names a microbatch on a chunk.
type key struct{ mb, chunk int }

// executor is one rank's state while it walks its schedule.
type executor struct {
	a        Args
	s        *Schedule
	inputs   map[key]*autograd.Var
	outputs  map[key]*autograd.Var
	outGrads map[key]*tensor.Tensor
	inGrads  map[key]*tensor.Tensor
	// waiting holds the pending ops of async exchanges.
	waiting map[Op]pendingOp
	// release holds outputs to deallocate once their send has finished.
	release map[key]bool
	resume  func() // leaves no_sync; nil when not inside it
	// wgrads holds, in a split schedule, each backward's parameter
	// gradients until its WeightGrad action runs them.
	wgrads map[key]*autograd.WeightGrads
	// embWgrads holds the output layer's deferred weight gradients, in
	// microbatch order, until the EmbeddingWgrad action runs them.
	embWgrads []*autograd.WeightGrads
	res       Result
	forwards  int // forward steps run so far
	firstMB   map[int]bool
}

// run walks the schedule's actions, then finishes the iteration: every
// async op is waited for, no_sync is left if the schedule left it entered,
// and finalize_model_grads is called, unless forward-only.
func run(ctx context.Context, a Args, s *Schedule) (*Result, error) {
	if len(a.Chunks) != max(s.VPP, 1) {
		return nil, fmt.Errorf("pp: %d model chunks for a schedule of %d virtual stages", len(a.Chunks), max(s.VPP, 1))
	}
	if pl := a.Config.PipelinePlacement; pl != s.Placement {
		return nil, fmt.Errorf("pp: the %s schedule runs on the %v placement of the model's chunks, but the model's are placed by %v (TransformerConfig.PipelinePlacement: pp.PlacementOf(schedule))", s.Name, s.Placement, pl)
	}
	e := &executor{a: a, s: s,
		inputs: map[key]*autograd.Var{}, outputs: map[key]*autograd.Var{},
		outGrads: map[key]*tensor.Tensor{}, inGrads: map[key]*tensor.Tensor{},
		waiting: map[Op]pendingOp{}, firstMB: map[int]bool{}, wgrads: map[key]*autograd.WeightGrads{},
	}
	fb, barrier := timer(a.Config, "forward-backward", 1), a.Config.BarrierWithL1Time
	fb.Start(barrier)
	for i, act := range s.Actions {
		var start time.Time
		if a.Trace != nil {
			start = time.Now()
		}
		if err := e.do(ctx, act); err != nil {
			return nil, fmt.Errorf("pipeline rank %d, schedule step %d (%v): %w", a.Rank, i, act, err)
		}
		if a.Trace != nil {
			a.Trace(Event{Step: i, Action: act, Start: start, End: time.Now()})
		}
	}
	if err := e.finish(ctx); err != nil {
		return nil, fmt.Errorf("pipeline rank %d, end of the schedule: %w", a.Rank, err)
	}
	fb.Stop(barrier)
	return &e.res, nil
}

// timer returns the config's timer called name, created at level if new
// (config.TimersFunc); without Timers, one that does nothing. The
// schedules time, as the reference's do, the whole pass
// ("forward-backward", level 1, finalize_model_grads included) and each
// step's computation ("forward-compute", "backward-compute", level 2).
func timer(cfg config.TransformerConfig, name string, level int) config.Timer {
	if cfg.Timers != nil {
		if t := cfg.Timers(name, level); t != nil {
			return t
		}
	}
	return noTimer{}
}

// noTimer is the timer of a config without Timers.
type noTimer struct{}

func (noTimer) Start(bool) {}
func (noTimer) Stop(bool)  {}

// do executes one action.
func (e *executor) do(ctx context.Context, act Action) error {
	cfg := e.a.Config
	switch act.Kind {
	case Forward:
		t := timer(cfg, "forward-compute", 2)
		t.Start(false)
		defer t.Stop(false)
		return e.forward(ctx, key{act.Microbatch, act.Chunk})
	case Backward:
		t := timer(cfg, "backward-compute", 2)
		t.Start(false)
		defer t.Stop(false)
		return e.backward(key{act.Microbatch, act.Chunk})
	case WeightGrad:
		t := timer(cfg, "backward-weight-compute", 2)
		t.Start(false)
		defer t.Stop(false)
		return e.weightGrad(ctx, key{act.Microbatch, act.Chunk})
	case EmbeddingWgrad:
		t := timer(cfg, "backward-weight-compute", 2)
		t.Start(false)
		defer t.Stop(false)
		return e.embeddingWgrad(ctx)
	case Comm:
		t := timer(cfg, commTimers[act.Call], 2)
		t.Start(false)
		defer t.Stop(false)
		return e.comm(ctx, act)
	case Wait:
		return e.wait(ctx, act.Op)
	case DisableGradSync:
		if e.resume == nil && cfg.NoSyncFunc != nil {
			e.resume = cfg.NoSyncFunc()
		}
	case EnableGradSync:
		if e.resume != nil {
			e.resume()
			e.resume = nil
		}
	case GradSync:
		if cfg.GradSyncFunc != nil {
			return cfg.GradSyncFunc(ctx, act.Chunk)
		}
	case ParamSync:
		if cfg.ParamSyncFunc != nil {
			return cfg.ParamSyncFunc(ctx, act.Chunk)
		}
	default:
		return fmt.Errorf("pp: unknown action kind %v", act.Kind)
	}
	return nil
}

// commTimers are the reference's timer names of the P2P communicator's
// calls (p2p_communication.py), by the call a Comm action stands for.
var commTimers = map[string]string{
	"recv_forward": "forward-recv", "send_forward": "forward-send",
	"recv_backward": "backward-recv", "send_backward": "backward-send",
	"send_forward_recv_forward": "forward-send-forward-recv", "send_forward_recv_backward": "forward-send-backward-recv",
	"send_backward_recv_forward": "backward-send-forward-recv", "send_backward_recv_backward": "backward-send-backward-recv",
	"send_forward_backward_recv_forward_backward": "forward-backward-send-forward-backward-recv",
}

// pendingOp is an op of an async exchange: its handles and its direction
// on the communicator.
type pendingOp struct {
	h   *p2p.Handles
	dir p2p.Dir
}

// lastStage reports whether chunk c computes the loss.
func (e *executor) lastStage(c int) bool { return e.s.lastStage(e.a.Rank, c) }

// firstStage reports whether chunk c holds the embedding.
func (e *executor) firstStage(c int) bool { return e.s.firstStage(e.a.Rank, c) }

// local returns the chunk on this rank that chunk c exchanges ops of
// direction d with, when the neighbouring stage is on this rank (the V
// placement's turn): the tensor is handed over without a message.
func (e *executor) local(c int, d Dir) (int, bool) {
	q, w, ok := e.s.peer(e.a.Rank, c, d)
	return w, ok && q == e.a.Rank
}

// handOver is what the neighbouring stage on this rank receives of t: the
// communicator's HandOver, as if t had crossed the wire.
func (e *executor) handOver(t *tensor.Tensor) *tensor.Tensor {
	if c := e.a.P2P.Comm; c != nil {
		return c.HandOver(t)
	}
	return t.Contiguous().Clone()
}

// input returns k's input: received, or handed over by the previous
// stage on this rank.
func (e *executor) input(k key) (*autograd.Var, error) {
	if in := e.inputs[k]; in != nil || e.firstStage(k.chunk) {
		return in, nil
	}
	c, ok := e.local(k.chunk, RecvPrev)
	if !ok {
		return nil, fmt.Errorf("pp: forward of microbatch %d on chunk %d has no input: the schedule never received it", k.mb, k.chunk)
	}
	prev := key{k.mb, c}
	out := e.outputs[prev]
	if out == nil {
		return nil, fmt.Errorf("pp: forward of microbatch %d on chunk %d before the forward of chunk %d, which hands it its input", k.mb, k.chunk, c)
	}
	in := autograd.NewLeaf(e.handOver(out.Value), "pipeline input", !e.a.ForwardOnly)
	e.sent(prev) // handed over: as if sent (deallocate_pipeline_outputs releases it)
	e.inputs[k] = in
	return in, nil
}

// forward runs forward_step for k.
func (e *executor) forward(ctx context.Context, k key) error {
	in, err := e.input(k)
	if err != nil {
		return err
	}
	if err := e.wait(ctx, Op{Dir: RecvPrev, Microbatch: k.mb, Chunk: k.chunk}); err != nil {
		return err
	}
	e.a.Chunks[k.chunk].SetInputTensor(in)
	step := ForwardStep{Microbatch: k.mb, Chunk: k.chunk, Input: in, IsFirstMicrobatch: !e.firstMB[k.chunk],
		CollectNonLossData: e.a.CollectNonLossData && e.lastStage(k.chunk)}
	e.firstMB[k.chunk] = true
	if e.a.ForwardOnly && e.a.FirstValStep != nil {
		step.IsFirstMicrobatch = *e.a.FirstValStep && step.IsFirstMicrobatch
	}
	if n := e.a.Config.NumMicrobatchesWithPartialActivationCheckpoints; n != nil && !e.a.ForwardOnly && e.s.Name != NameNoPipelining {
		ck := e.forwards%(e.s.Warmup+1) >= *n
		step.CheckpointActivations = &ck
	}
	e.forwards++
	out, lossFn, err := e.a.ForwardStep(ctx, step)
	if err != nil {
		return err
	}
	if e.a.ForwardOnly {
		delete(e.inputs, k) // no backward will need it
	}
	if e.lastStage(k.chunk) {
		if out, err = e.loss(out, lossFn); err != nil {
			return err
		}
	}
	if !e.a.ForwardOnly {
		e.outputs[k] = out
		e.a.Tape.Hold(out.Value)
	} else if !e.lastStage(k.chunk) {
		e.outputs[k] = out // until it is sent
	}
	return nil
}

// loss applies the loss function on the last stage and stores what it
// reports.
func (e *executor) loss(out *autograd.Var, lossFn LossFunc) (*autograd.Var, error) {
	if lossFn == nil {
		e.res.Store = append(e.res.Store, out)
		return out, nil
	}
	if e.a.CollectNonLossData {
		l, err := lossFn(out)
		if err != nil {
			return nil, err
		}
		e.res.Store = append(e.res.Store, l.Reported)
		return out, nil
	}
	l, err := lossFn(out)
	if err != nil {
		return nil, err
	}
	e.res.Store = append(e.res.Store, l.Reported)
	if l.NumTokens > 0 {
		e.res.NumTokens += l.NumTokens
	}
	return scaleLoss(e.a.Tape, l, e.a.NumMicrobatches, max(e.a.ContextParallelSize, 1), e.a.Config.CalculatePerTokenLoss)
}

// backward runs backward_step for k: from the output's graph node with the
// received gradient (or, on the last stage, from the scaled loss), leaving
// the input's gradient to send.
func (e *executor) backward(k key) error {
	out := e.outputs[k]
	if out == nil {
		return fmt.Errorf("pp: backward of microbatch %d on chunk %d before its forward", k.mb, k.chunk)
	}
	var grad *tensor.Tensor
	if !e.lastStage(k.chunk) {
		if grad = e.outGrads[k]; grad == nil {
			return fmt.Errorf("pp: backward of microbatch %d on chunk %d has no output gradient: the schedule never received it", k.mb, k.chunk)
		}
		delete(e.outGrads, k)
	} else if f := e.a.Config.GradScaleFunc; f != nil {
		if s := f(); s != 1 {
			out = autograd.Scale(e.a.Tape, out, s)
		}
	}
	switch {
	case e.s.SplitBackward:
		w, err := autograd.BackwardSplit(e.a.Tape, out, grad)
		if err != nil {
			return err
		}
		e.wgrads[k] = w
	case e.s.DefersEmbedding(k.mb, k.chunk):
		if e.a.OutputWeight == nil {
			return fmt.Errorf("pp: defer_embedding_wgrad_compute on a last stage whose output-layer weight is not given (Args.OutputWeight)")
		}
		w, err := autograd.BackwardSplitOnly(e.a.Tape, out, grad, e.a.OutputWeight)
		if err != nil {
			return err
		}
		if w.Len() == 0 {
			return fmt.Errorf("pp: defer_embedding_wgrad_compute: the backward of microbatch %d gave the output-layer weight %q no gradient to defer: Args.OutputWeight is not the weight the forward used", k.mb, e.a.OutputWeight.Name)
		}
		e.embWgrads = append(e.embWgrads, w)
	default:
		if err := autograd.Backward(e.a.Tape, out, grad); err != nil {
			return err
		}
	}
	e.a.Tape.Unhold(e.outputs[k].Value)
	delete(e.outputs, k)
	if in := e.inputs[k]; in != nil {
		g := in.Grad
		if g == nil {
			g = tensor.New(in.Value.Shape()...) // nothing flowed back
		}
		if c, ok := e.local(k.chunk, SendPrev); ok {
			e.outGrads[key{k.mb, c}] = e.handOver(g)
		} else {
			e.inGrads[k] = g
		}
		delete(e.inputs, k)
	}
	return nil
}

// weightGrad runs the parameter gradients of k's split backward.
func (e *executor) weightGrad(ctx context.Context, k key) error {
	w := e.wgrads[k]
	if w == nil {
		return fmt.Errorf("pp: weight gradients of microbatch %d on chunk %d before its backward", k.mb, k.chunk)
	}
	delete(e.wgrads, k)
	return w.Run(ctx)
}

// embeddingWgrad runs the output layer's deferred weight gradients in
// microbatch order (drain_embedding_wgrad_compute). Outside no_sync the
// work of every microbatch but the last runs inside it, so the weight's
// hooks reduce its gradient once, whole.
func (e *executor) embeddingWgrad(ctx context.Context) error {
	ws := e.embWgrads
	e.embWgrads = nil
	var resume func()
	if e.resume == nil && e.a.Config.NoSyncFunc != nil && len(ws) > 1 {
		resume = e.a.Config.NoSyncFunc()
	}
	for i, w := range ws {
		if i == len(ws)-1 && resume != nil {
			resume()
			resume = nil
		}
		if err := w.Run(ctx); err != nil {
			if resume != nil {
				resume()
			}
			return err
		}
	}
	return nil
}

// comm runs one exchange: its ops grouped by the communicator that
// carries them (P2P.GradComm, when set, the gradients) and put in the
// communicator's directions (the placement's: the V's chunk 1 sends its
// activations to the previous rank).
func (e *executor) comm(ctx context.Context, act Action) error {
	var wires []*wire
	for i := range act.Ops {
		op := &act.Ops[i]
		c, err := e.communicator(op.Dir)
		if err != nil {
			return fmt.Errorf("pp: %v: %w", op, err)
		}
		j := slices.IndexFunc(wires, func(w *wire) bool { return w.c == c })
		if j < 0 {
			j, wires = len(wires), append(wires, &wire{c: c, ex: p2p.Exchange{Shape: e.a.P2P.Shape}})
		}
		if err := e.addOp(wires[j], op); err != nil {
			return err
		}
	}
	// Over two communicators even a blocking exchange issues every op
	// before it waits for any, as one exchange would.
	async := act.Async || len(wires) > 1
	for _, w := range wires {
		w.ex.Async = async
		fromPrev, fromNext, pending, err := w.c.Communicate(ctx, w.ex)
		if err != nil {
			return err
		}
		e.received(w.ops[p2p.RecvPrev], fromPrev)
		e.received(w.ops[p2p.RecvNext], fromNext)
		for d, op := range w.ops {
			if op != nil && async {
				e.waiting[*op] = pendingOp{pending, p2p.Dir(d)}
			}
		}
	}
	for _, op := range act.Ops {
		switch {
		case act.Async:
		case async:
			if err := e.wait(ctx, op); err != nil {
				return err
			}
		case op.Dir == SendNext:
			e.sent(key{op.Microbatch, op.Chunk})
		}
	}
	return nil
}

// wire is one communicator's part of an exchange: the p2p exchange and
// the op behind each of its directions.
type wire struct {
	c   *p2p.Communicator
	ex  p2p.Exchange
	ops [4]*Op // by p2p.Dir
}

// communicator returns the communicator that carries ops of direction d.
func (e *executor) communicator(d Dir) (*p2p.Communicator, error) {
	if e.a.P2P.Comm == nil {
		return nil, fmt.Errorf("a pipeline without a communicator")
	}
	if d == SendPrev || d == RecvNext { // gradients
		if e.a.P2P.GradComm != nil {
			return e.a.P2P.GradComm, nil
		}
		if e.s.GradientsApart() {
			return nil, fmt.Errorf("the %v placement sends activations and gradients both ways between two ranks, which one communicator cannot tell apart: give the executor a gradient communicator (Args.P2P.GradComm) on a second group of the pipeline's ranks", e.s.Placement)
		}
	}
	return e.a.P2P.Comm, nil
}

// addOp puts op into w in the communicator's direction: the same as the
// op's when the chunk's stages follow the ranks up, the other way when
// they come back down.
func (e *executor) addOp(w *wire, op *Op) error {
	d := p2p.Dir(op.Dir)
	if !e.s.Placement.TowardNextRank(op.Chunk) {
		d = [...]p2p.Dir{p2p.SendPrev: p2p.SendNext, p2p.RecvPrev: p2p.RecvNext, p2p.SendNext: p2p.SendPrev, p2p.RecvNext: p2p.RecvPrev}[d]
	}
	if w.ops[d] != nil {
		return fmt.Errorf("pp: %v and %v of one exchange both go %v", *w.ops[d], *op, d)
	}
	w.ops[d] = op
	k := key{op.Microbatch, op.Chunk}
	var t *tensor.Tensor
	switch op.Dir {
	case SendNext:
		out := e.outputs[k]
		if out == nil {
			return fmt.Errorf("pp: %v: no output to send", *op)
		}
		t = out.Value
	case SendPrev:
		if t = e.inGrads[k]; t == nil {
			return fmt.Errorf("pp: %v: no input gradient to send", *op)
		}
		delete(e.inGrads, k)
	}
	switch d {
	case p2p.SendNext:
		w.ex.SendNext = t
	case p2p.SendPrev:
		w.ex.SendPrev = t
	case p2p.RecvPrev:
		w.ex.RecvPrev, w.ex.Shape = true, e.a.P2P.shapeOf(*op)
	case p2p.RecvNext:
		w.ex.RecvNext, w.ex.ShapeNext = true, e.a.P2P.shapeOf(*op)
	}
	return nil
}

// received files a received tensor under the op that asked for it: an
// input activation or an output gradient.
func (e *executor) received(op *Op, t *tensor.Tensor) {
	if op == nil {
		return
	}
	k := key{op.Microbatch, op.Chunk}
	if op.Dir == RecvPrev {
		e.inputs[k] = autograd.NewLeaf(t, "pipeline input", !e.a.ForwardOnly)
	} else {
		e.outGrads[k] = t
	}
}

// sent is called once the send of k's output has finished: a forward-only
// output is dropped, and with deallocate_pipeline_outputs a training
// output's storage is released (deallocate_output_tensor): only its graph
// node is needed for backward, unless a recorded operation saved the
// tensor itself.
func (e *executor) sent(k key) {
	out := e.outputs[k]
	if out == nil {
		return
	}
	if e.a.ForwardOnly {
		delete(e.outputs, k)
		return
	}
	if e.a.Config.DeallocatePipelineOutputs && !e.a.Tape.Saved(out.Value) && !out.Value.Released() {
		e.a.Tape.Release(out.Value)
	}
}

// wait waits for an async op, if it is pending.
func (e *executor) wait(ctx context.Context, op Op) error {
	p, ok := e.waiting[op]
	if !ok {
		return nil
	}
	delete(e.waiting, op)
	if err := p.h.Wait(ctx, p.dir); err != nil {
		return err
	}
	if op.Dir == SendNext {
		e.sent(key{op.Microbatch, op.Chunk})
	}
	return nil
}

// finish waits for every outstanding op, leaves no_sync and finalizes the
// gradients.
func (e *executor) finish(ctx context.Context) error {
	for op := range e.waiting {
		if err := e.wait(ctx, op); err != nil {
			return err
		}
	}
	// A forward-only schedule enters no_sync and never leaves it (as the
	// reference's); leave it here so that the next training iteration
	// starts synchronising. Training schedules have left it already.
	if e.resume != nil {
		e.resume()
		e.resume = nil
	}
	if e.a.ForwardOnly {
		return nil
	}
	if n := len(e.wgrads) + len(e.embWgrads); n > 0 {
		return fmt.Errorf("pp: %d backwards' weight gradients never ran: the schedule has no WeightGrad or EmbeddingWgrad action for them", n)
	}
	cfg := e.a.Config
	if cfg.FinalizeModelGradsFunc != nil {
		var n *int64
		if cfg.CalculatePerTokenLoss {
			n = &e.res.NumTokens
		}
		return cfg.FinalizeModelGradsFunc(ctx, n, e.a.ForceAllReduce)
	}
	return nil
}
