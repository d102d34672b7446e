package pp

import (
	"fmt"
	"slices"
)

// Names of the schedules with a split backward.
const (
	// NameSplit is a schedule whose every backward is followed at once by
	// its weight gradients (SplitEachBackward).
	NameSplit = "split_backward"
	// NameZBH1 is the zero-bubble ZB-H1 schedule (ZeroBubbleH1).
	NameZBH1 = "zero_bubble_h1"
	// NameZBH2 is the zero-bubble ZB-H2 schedule (ZeroBubbleH2).
	NameZBH2 = "zero_bubble_h2"
)

// SplitEachBackward returns s with its backward split (SplitBackward):
// each Backward action is followed at once by the WeightGrad of the same
// microbatch and chunk. It computes what s computes, in the same order,
// so its gradients are s's bit for bit; it is the baseline the
// zero-bubble schedules move weight gradients from. s is not changed.
func SplitEachBackward(s *Schedule) *Schedule {
	out := *s
	out.Name, out.SplitBackward, out.Actions = NameSplit, true, nil
	for _, a := range s.Actions {
		out.Actions = append(out.Actions, a)
		if a.Kind == Backward {
			out.Actions = append(out.Actions, Action{Kind: WeightGrad, Microbatch: a.Microbatch, Chunk: a.Chunk})
		}
	}
	return &out
}

// ZeroBubbleH1 returns rank's ZB-H1 schedule (Qi et al., "Zero Bubble
// Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, §2.1) for P = pp
// stages and M = m microbatches: 1F1B's forwards, backwards and exchanges
// in 1F1B's order (WithoutInterleaving, its warmup included), each
// backward split into B, the input gradient, sent upstream at once, and
// W, the weight gradients, which stage s puts off by s microbatches: the
// W of microbatch i runs while the gradient of the B of microbatch i + s
// travels upstream and the next input arrives (the exchange that sends
// that gradient, 1F1B's send_backward_recv_forward or send_backward, is
// issued asynchronously, then the W, then the exchange's waits; on the
// first stage, which sends no gradient, right after that B), the rest at
// the end, in microbatch order. The B's so reach the upstream stages
// without waiting for W's, and the W's held back fill the later stages'
// idle tail; every stage holds at most P microbatches' activations, the
// first stage's 1F1B peak, and with equal F, B and W times the bubble is
// a third of 1F1B's, (P − 1)(F + B − W) against (P − 1)(F + B + W).
//
// Its asynchronous exchanges need an unbatched communicator
// (p2p.Config.BatchP2PComm false; gotron train sets it so).
//
// Without the distributed optimizer's grad_sync_func no_sync is left just
// before the last W (whose hooks launch the data-parallel reduction); with
// it the stages but the first leave it after the last W and call
// grad_sync_func, as 1F1B does after the last backward. It panics as
// WithoutInterleaving.
func ZeroBubbleH1(pp, rank, m int, gradSyncFunc bool) *Schedule {
	base := WithoutInterleaving(pp, rank, m, false, gradSyncFunc)
	out := *base
	out.Name, out.SplitBackward, out.Actions = NameZBH1, true, nil
	var pending []Action // W's not placed yet, oldest first
	settle := func() {   // keep at most rank W's pending
		for len(pending) > rank {
			out.Actions = append(out.Actions, pending[0])
			pending = pending[1:]
		}
	}
	for _, a := range base.Actions {
		switch {
		case a.Kind == EnableGradSync || a.Kind == GradSync:
			continue // placed around the last W below
		case a.Kind == Comm && sendsGradient(a):
			// The W's run while the gradient travels upstream and the
			// next input arrives: the exchange (1F1B's
			// send_backward_recv_forward, or send_backward) is issued
			// asynchronously, then the W's, then its waits.
			a.Async = true
			out.Actions = append(out.Actions, a)
			settle()
			for _, o := range a.Ops {
				out.Actions = append(out.Actions, Action{Kind: Wait, Op: o})
			}
			continue
		}
		out.Actions = append(out.Actions, a)
		if a.Kind == Backward {
			pending = append(pending, Action{Kind: WeightGrad, Microbatch: a.Microbatch, Chunk: a.Chunk})
			if rank == 0 { // no gradient to send
				settle()
			}
		}
	}
	out.Actions = append(out.Actions, pending...)
	if gradSyncFunc && rank != 0 {
		out.Actions = append(out.Actions, Action{Kind: EnableGradSync}, Action{Kind: GradSync})
	} else {
		n := len(out.Actions) - 1
		for out.Actions[n].Kind != WeightGrad { // the last W: W's are placed in microbatch order
			n--
		}
		out.Actions = append(out.Actions[:n], append([]Action{{Kind: EnableGradSync}}, out.Actions[n:]...)...)
	}
	return emitterOf(&out).done()
}

// lane is one kind of tensor a chunk receives before a computation and
// sends after it (activations for forwards, gradients for backwards) in
// withAsyncExchanges.
type lane struct {
	recv, send         Dir
	recvCall, sendCall string
	chunk              int
	recvs, sends       bool // whether the chunk receives, sends this kind
	sent               *Op  // the send not waited for yet
}

// newLanes returns chunk c's two lanes on s's rank: activations come
// from the previous stage and go to the next, gradients the other way;
// a lane neither receives from nor sends to a stage that does not exist
// or that is on this rank (s.Placement hands those over without a
// message).
func newLanes(s *Schedule, c int) (fwd, bwd *lane) {
	remote := func(d Dir) bool {
		q, _, ok := s.peer(s.Rank, c, d)
		return ok && q != s.Rank
	}
	prev, next := remote(RecvPrev), remote(RecvNext)
	fwd = &lane{recv: RecvPrev, send: SendNext, recvCall: "recv_forward", sendCall: "send_forward", chunk: c, recvs: prev, sends: next}
	bwd = &lane{recv: RecvNext, send: SendPrev, recvCall: "recv_backward", sendCall: "send_backward", chunk: c, recvs: next, sends: prev}
	return fwd, bwd
}

// post posts the receive of microbatch x, if the chunk receives and x < m.
func (l *lane) post(e *emitter, x, m int) {
	e.comm(l.recvCall, true, op(l.recvs && x < m, l.recv, x, l.chunk))
}

// around emits the computation of microbatch x: the wait for its input
// and the receive of the next posted before, the send of its result
// after, once the previous send has been waited for.
func (l *lane) around(e *emitter, x, m int, compute func()) {
	if l.recvs {
		e.wait(Op{Dir: l.recv, Microbatch: x, Chunk: l.chunk})
		l.post(e, x+1, m)
	}
	compute()
	if l.sends {
		if l.sent != nil {
			e.wait(*l.sent)
		}
		l.sent = op(true, l.send, x, l.chunk)
		e.comm(l.sendCall, true, l.sent)
	}
}

// ZeroBubble reports whether the schedule named (Config.Schedule) is a
// zero-bubble one: its backward split, its exchanges asynchronous (it
// needs an unbatched communicator, p2p.Config.BatchP2PComm false).
func ZeroBubble(schedule string) bool {
	return schedule == ScheduleZBH1 || schedule == ScheduleZBH2 || schedule == ScheduleZBV || schedule == ScheduleDualPipeV
}

// HeldMicrobatches returns the most microbatches pipeline rank r of p
// holds activations for at once, over m microbatches, under the schedule
// named ("" or ScheduleOneFOneB, ScheduleZBH1, ScheduleZBH2, ScheduleZBV,
// ScheduleDualPipeV),
// in microbatches of the rank's layers: a forward's held until its
// backward, or its weight gradients where they are deferred: 1F1B's P −
// r, ZB-H1's P, ZB-H2's 2P − 1, at most m (Verify's PeakLive); ZB-V's
// two chunks, each half the rank's layers, up to 2P chunks' (PeakLive),
// so at most P; DualPipeV's 2P + 1 chunks', at most P + 1. The memory
// estimate reads it.
func HeldMicrobatches(schedule string, p, r, m int) int {
	switch schedule {
	case ScheduleZBH1, ScheduleZBV:
		return min(p, m)
	case ScheduleDualPipeV:
		return min(p+1, m)
	case ScheduleZBH2:
		return min(2*p-1, m)
	}
	return min(p-r, m)
}

// sendsGradient reports whether a Comm action sends an input gradient to
// the previous stage.
func sendsGradient(a Action) bool {
	for _, o := range a.Ops {
		if o.Dir == SendPrev {
			return true
		}
	}
	return false
}

// emitterOf wraps a built schedule for emitter.done.
func emitterOf(s *Schedule) *emitter { return &emitter{s: s} }

// checkOneChunkSplit refuses ZB-H1 or ZB-H2 (name) where it cannot run:
// it pipelines one model chunk per rank over at least two stages.
func checkOneChunkSplit(c Config, name string) error {
	switch {
	case c.PP < 2:
		return fmt.Errorf("--pipeline-schedule %s: pipeline_model_parallel_size = %d has no pipeline bubble to fill: use it with %s ≥ 2, or drop the flag", name, c.PP, flagPP)
	case c.Interleaved():
		return fmt.Errorf("--pipeline-schedule %s runs one model chunk per rank, but virtual_pipeline_model_parallel_size = %d: unset %s (and a layout's chunks), or choose %s", name, c.VPP, flagVPP, ScheduleOneFOneB)
	case c.OverlapP2PComm:
		return fmt.Errorf("--pipeline-schedule %s exchanges tensors without overlap: turn --overlap-p2p-communication off", name)
	}
	return nil
}

// ZeroBubbleH2 returns rank's ZB-H2 schedule (Qi et al. 2024, §2.2) for P
// = pp stages and M = m microbatches: zero bubble at equal F, B and W
// times, for up to 2P − 1 microbatches' activations on a stage, about
// twice 1F1B's. Stage s runs M + 2(P − 1) steps; step x runs, each where
// its microbatch exists (0 ≤ i < M), the forward of x, the backward (B)
// of x − 2(P − 1 − s) and the weight gradients (W) of x − 2(P − 1): a
// warmup of 2(P − 1 − s) forwards alone, 2s forwards with a B, the steady
// F B W, then 2(P − 1 − s) B's with a W and 2s W's alone. Each stage's
// warmup forwards, 2(P − s) − 1 before its first B, fill the time the
// first gradient takes to come back, and its tail of W's the time the
// later stages' last B's take; every stage's work is so packed into
// M·(F + B + W) from its first forward on, a parallelogram where 1F1B's
// is a trapezoid.
//
// The exchanges are asynchronous (an unbatched communicator): each
// receive is posted one microbatch ahead and waited for just before its
// F or B, each send posted right after its F or B and waited for before
// the next send of its kind, so no rank waits on a send and a message
// travels while the rank computes. no_sync is left as ZeroBubbleH1 leaves
// it. It panics as WithoutInterleaving.
func ZeroBubbleH2(pp, rank, m int, gradSyncFunc bool) *Schedule {
	if pp < 1 || rank < 0 || rank >= pp || m < 1 {
		panic(fmt.Sprintf("pp.ZeroBubbleH2: rank %d of %d with %d microbatches", rank, pp, m))
	}
	warmup := min(2*(pp-rank)-1, m)
	s := &Schedule{Name: NameZBH2, PP: pp, VPP: 1, Microbatches: m, GroupSize: pp, Rank: rank,
		Warmup: warmup, Remaining: m - warmup, AllWarmup: warmup == m, SplitBackward: true}
	var order []Action
	in := func(i int) bool { return i >= 0 && i < m }
	for x := range m + 2*(pp-1) {
		if in(x) {
			order = append(order, Action{Kind: Forward, Microbatch: x})
		}
		if b := x - 2*(pp-1-rank); in(b) {
			order = append(order, Action{Kind: Backward, Microbatch: b})
		}
		if w := x - 2*(pp-1); in(w) {
			order = append(order, Action{Kind: WeightGrad, Microbatch: w})
		}
	}
	return withAsyncExchanges(s, order, gradSyncFunc)
}

// withAsyncExchanges fills s's actions from a compute order of F, B and
// W: every receive asynchronous and posted one ahead, every send
// asynchronous, waited for before the next of its kind and chunk
// (ZeroBubbleH2, ZeroBubbleV). Each chunk's last W runs outside no_sync,
// so that its hooks launch the chunk's reduction, and every other W
// inside it (no_sync is left just before the last W of a chunk and
// entered again after it while other chunks' W's follow); with
// gradSyncFunc, but on the first stage of a one-chunk schedule (as
// 1F1B), no_sync is left after the last W instead and grad_sync_func
// called for each chunk.
func withAsyncExchanges(s *Schedule, order []Action, gradSyncFunc bool) *Schedule {
	e := newEmitter(s)
	m, v := s.Microbatches, max(s.VPP, 1)
	fwd, bwd := make([]*lane, v), make([]*lane, v)
	for c := range v {
		fwd[c], bwd[c] = newLanes(s, c)
	}
	e.disableGradSync()
	for c := range v {
		fwd[c].post(e, 0, m)
		if !s.ForwardOnly {
			bwd[c].post(e, 0, m)
		}
	}
	lastW := lastWeightGrads(order, v)
	hooks := !gradSyncFunc || v == 1 && s.Rank == 0
	for i, a := range order {
		x, c := a.Microbatch, a.Chunk
		switch a.Kind {
		case Forward:
			fwd[c].around(e, x, m, func() { e.forward(x, c) })
		case Backward:
			bwd[c].around(e, x, m, func() { e.backward(x, c) })
		case WeightGrad:
			if !hooks || lastW[c] != i {
				e.add(a)
				continue
			}
			e.enableGradSync()
			e.add(a)
			if slices.ContainsFunc(order[i+1:], func(b Action) bool { return b.Kind == WeightGrad }) {
				e.disableGradSync()
			}
		}
	}
	for _, l := range append(fwd, bwd...) {
		if l.sent != nil {
			e.wait(*l.sent)
		}
	}
	if e.noSync && !s.ForwardOnly { // (evaluation stays in no_sync, as the reference's)
		e.enableGradSync()
		if gradSyncFunc {
			for c := range v {
				e.gradSync(c)
			}
		}
	}
	return e.done()
}

// lastWeightGrads returns, for each of the v chunks, the index in order
// of its last W (−1 if it has none).
func lastWeightGrads(order []Action, v int) []int {
	last := make([]int, v)
	for c := range last {
		last[c] = -1
	}
	for i, a := range order {
		if a.Kind == WeightGrad {
			last[a.Chunk] = i
		}
	}
	return last
}
