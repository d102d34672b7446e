package pp

import "fmt"

// Names of the schedules with a split backward.
const (
	// NameSplit is a schedule whose every backward is followed at once by
	// its weight gradients (SplitEachBackward).
	NameSplit = "split_backward"
	// NameZBH1 is the zero-bubble ZB-H1 schedule (ZeroBubbleH1).
	NameZBH1 = "zero_bubble_h1"
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

// checkZBH1 refuses ZB-H1 where it cannot run: it pipelines one model
// chunk per rank over at least two stages.
func checkZBH1(c Config) error {
	switch {
	case c.PP < 2:
		return fmt.Errorf("--pipeline-schedule %s: pipeline_model_parallel_size = %d has no pipeline bubble to fill: use it with %s ≥ 2, or drop the flag", ScheduleZBH1, c.PP, flagPP)
	case c.Interleaved():
		return fmt.Errorf("--pipeline-schedule %s runs one model chunk per rank, but virtual_pipeline_model_parallel_size = %d: unset %s (and a layout's chunks), or choose %s", ScheduleZBH1, c.VPP, flagVPP, ScheduleOneFOneB)
	case c.OverlapP2PComm:
		return fmt.Errorf("--pipeline-schedule %s exchanges tensors without overlap: turn --overlap-p2p-communication off", ScheduleZBH1)
	}
	return nil
}
