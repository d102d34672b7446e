package pp

import (
	"fmt"
	"strings"
)

// VerifyResult is what Verify learns from a run of the schedules.
type VerifyResult struct {
	// PeakLive[r] is the most microbatch-chunks rank r holds activations
	// for at once: forwards whose backward has not run yet. Forward-only
	// schedules free each activation after its forward, so they hold 0.
	PeakLive []int
}

// VerifyError is a problem Verify found: Rank and Step locate it (the
// action index in that rank's list; −1 when the problem is not at one
// step), Kind says what it is ("deadlock", "mismatch", "order", "missing",
// "unmatched", "config", "sync").
type VerifyError struct {
	Kind       string
	Rank, Step int
	Msg        string
}

func (e *VerifyError) Error() string { return "pp: verify: " + e.Kind + ": " + e.Msg }

// Verify plays every rank's schedule against the others as a distributed
// run would, schedules[r] being pipeline rank r's:
//
//   - a Comm action posts its ops and, unless Async, blocks until each has
//     met its counterpart; Wait blocks until its op has;
//   - a send to the next rank meets that rank's receive from the previous
//     one, a send to the previous rank its receive from the next, first in
//     first out for each ordered pair of ranks and kind of tensor
//     (activations, gradients), on the ring next(r) = r+1 mod P; the pair
//     must agree on the tensor: (m, c) sent by the last rank to the next
//     arrives as (m, c+1) on rank 0, a gradient (m, c) sent by rank 0 as
//     (m, c−1) on the last rank; with P = 1 there is no communication;
//   - a tensor is received when its synchronous Comm returns, or when its
//     async receive has been waited for; Forward(m, c) consumes its input
//     (none on rank 0's chunk 0), Backward(m, c) needs Forward(m, c) and
//     consumes its output gradient (none on the last rank's last chunk);
//     a send carries a tensor already computed;
//   - grad sync: no_sync is entered and left alternately; a backward run
//     outside no_sync is its chunk's last; each chunk's gradients are
//     synchronised exactly once (that backward, or GradSync after it), and
//     no_sync is left at the end (training schedules); ParamSync of a chunk
//     comes at most once and before its first forward; under
//     defer_embedding_wgrad_compute the last chunk's deferred output-layer
//     weight gradients run once, after its last backward, and are reduced
//     (EmbeddingWgrad outside no_sync, or GradSync after it).
//
// It reports a deadlock (each blocked rank, its step and what it waits
// for), a receive that meets the wrong tensor, ops left unmatched or
// receives never waited for, and any (m, c) not run forward (and backward,
// unless forward-only) exactly once; else it returns the peak of live
// activations per rank.
func Verify(schedules []*Schedule) (*VerifyResult, error) {
	return VerifyWith(schedules, VerifyOptions{})
}

// VerifyOptions change how Verify matches messages.
type VerifyOptions struct {
	// SharedPairFIFO matches all messages from one rank to another in one
	// first-in first-out queue, activations and gradients alike, as comm
	// does (comm/local matches per ordered pair, with no tags). Each Comm
	// action then posts its sends to one peer in the order send_next,
	// send_prev and its receives in the order recv_prev, recv_next, the
	// order package pp/p2p issues them in. It matters only when P = 2, where
	// the next and the previous rank are one peer (Megatron-LM issue #750);
	// a send that meets a receive of the other kind is a mismatch.
	SharedPairFIFO bool
}

// VerifyWith is Verify with options.
func VerifyWith(schedules []*Schedule, opts VerifyOptions) (*VerifyResult, error) {
	if err := checkShapes(schedules); err != nil {
		return nil, err
	}
	w := newSimWorld(schedules)
	w.shared = opts.SharedPairFIFO
	for !w.finished() {
		progress := false
		for _, rs := range w.ranks {
			moved, err := w.advance(rs)
			if err != nil {
				return nil, err
			}
			progress = progress || moved
		}
		if !progress {
			return nil, w.deadlock()
		}
	}
	if err := w.endChecks(); err != nil {
		return nil, err
	}
	res := &VerifyResult{PeakLive: make([]int, len(w.ranks))}
	for r, rs := range w.ranks {
		res.PeakLive[r] = rs.peak
	}
	return res, nil
}

func checkShapes(schedules []*Schedule) error {
	if len(schedules) == 0 {
		return &VerifyError{Kind: "config", Step: -1, Msg: "no schedules"}
	}
	s0 := schedules[0]
	for r, s := range schedules {
		if s == nil {
			return &VerifyError{Kind: "config", Rank: r, Step: -1, Msg: fmt.Sprintf("rank %d has no schedule", r)}
		}
		if s.Rank != r || s.PP != len(schedules) || s.VPP != s0.VPP || s.Microbatches != s0.Microbatches || s.VPP < 1 {
			return &VerifyError{Kind: "config", Rank: r, Step: -1, Msg: fmt.Sprintf(
				"schedule %d is rank %d of pp %d with vpp %d and %d microbatches; rank 0 has vpp %d, %d microbatches, and there are %d schedules",
				r, s.Rank, s.PP, s.VPP, s.Microbatches, s0.VPP, s0.Microbatches, len(schedules))}
		}
	}
	return nil
}

// endChecks runs once every rank has reached the end of its list.
func (w *simWorld) endChecks() error {
	var problems []string
	for k, q := range w.chans {
		for _, ref := range q.sends {
			problems = append(problems, fmt.Sprintf("rank %d step %d: %v to rank %d never met a receive", k.src, ref.step, w.opAt(ref), k.dst))
		}
		for _, ref := range q.recvs {
			problems = append(problems, fmt.Sprintf("rank %d step %d: %v from rank %d never met a send", k.dst, ref.step, w.opAt(ref), k.src))
		}
	}
	if len(problems) > 0 {
		return &VerifyError{Kind: "unmatched", Rank: -1, Step: -1, Msg: strings.Join(sortedStrings(problems), "; ")}
	}
	for r, rs := range w.ranks {
		if err := rs.endCheck(w, r); err != nil {
			return err
		}
	}
	return nil
}

func (rs *rankState) endCheck(w *simWorld, r int) error {
	fail := func(kind, format string, args ...any) error {
		return &VerifyError{Kind: kind, Rank: r, Step: -1, Msg: fmt.Sprintf("rank %d: ", r) + fmt.Sprintf(format, args...)}
	}
	var unwaited []string
	for o, st := range rs.async {
		if !st.waited && (o.Dir == RecvPrev || o.Dir == RecvNext) {
			unwaited = append(unwaited, fmt.Sprintf("step %d's %v", st.step, o))
		}
	}
	if len(unwaited) > 0 {
		return fail("missing", "async receives never waited for, so their tensors are never usable: %s", strings.Join(sortedStrings(unwaited), ", "))
	}
	want := w.m * w.v
	if len(rs.fwd) != want {
		return fail("missing", "%d forwards, want one for each of %d microbatches × %d chunks = %d", len(rs.fwd), w.m, w.v, want)
	}
	if n := len(rs.inputs) + len(rs.grads); n > 0 {
		return fail("missing", "%d received tensors are never used: inputs %v, gradients %v", n, mcKeys(rs.inputs), mcKeys(rs.grads))
	}
	if rs.s.ForwardOnly {
		if len(rs.bwd) != 0 {
			return fail("missing", "a forward-only schedule runs %d backwards", len(rs.bwd))
		}
		return nil
	}
	if len(rs.bwd) != want {
		return fail("missing", "%d backwards, want %d", len(rs.bwd), want)
	}
	if rs.s.SplitBackward && len(rs.wgt) != want {
		return fail("missing", "%d weight gradients, want one after each of the %d backwards", len(rs.wgt), want)
	}
	if rs.noSync {
		return fail("sync", "the schedule ends inside no_sync: the last microbatch's gradients would never be reduced")
	}
	if rs.s.DeferredEmbeddingWgrads > 0 && !rs.embSynced {
		return fail("sync", "the deferred output-layer weight gradients are never run and reduced (emb_wgrad outside no_sync, or grad_sync after it)")
	}
	for c, n := range rs.synced {
		if n != 1 {
			return fail("sync", "chunk %d's gradients are synchronised %d times, want once (its last backward outside no_sync, or grad_sync after it)", c, n)
		}
	}
	return nil
}
