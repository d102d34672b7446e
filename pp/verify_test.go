package pp

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustBuildAll(t *testing.T, cfg Config) []*Schedule {
	t.Helper()
	ss, err := BuildAll(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ss); err != nil {
		t.Fatalf("the unbroken schedule fails: %v", err)
	}
	return ss
}

func actionIndex(s *Schedule, pred func(Action) bool, last bool) int {
	idx := -1
	for i, a := range s.Actions {
		if pred(a) {
			idx = i
			if !last {
				break
			}
		}
	}
	return idx
}

func wantVerifyError(t *testing.T, ss []*Schedule, kind string, parts ...string) *VerifyError {
	t.Helper()
	_, err := Verify(ss)
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a %s VerifyError", err, kind)
	}
	if ve.Kind != kind {
		t.Fatalf("got %v, want kind %s", err, kind)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%q lacks %q", err, p)
		}
	}
	return ve
}

// TestVerifyCatchesSwappedComms swaps rank 0's last warmup send_forward
// with its first cooldown recv_backward (PP4 M8 1F1B): rank 0 then waits
// for a gradient that cannot come before its activation leaves.
func TestVerifyCatchesSwappedComms(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 4, Microbatches: 8})
	s := ss[0]
	i := actionIndex(s, func(a Action) bool { return a.Call == "send_forward" }, true)
	j := actionIndex(s, func(a Action) bool { return a.Call == "recv_backward" }, false)
	if i < 0 || j < 0 {
		t.Fatal("comm actions not found")
	}
	s.Actions[i], s.Actions[j] = s.Actions[j], s.Actions[i]
	ve := wantVerifyError(t, ss, "deadlock", "rank 0 at step 6", "recv_next(m5,c0) from rank 1", "rank 1 at step")
	if ve.Rank != 0 || ve.Step != i {
		t.Errorf("rank %d step %d, want rank 0 step %d", ve.Rank, ve.Step, i)
	}
}

func TestVerifyCatchesWrongTensor(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, Microbatches: 4})
	s := ss[1]
	i := actionIndex(s, func(a Action) bool { return a.Call == "send_backward_recv_forward" }, false)
	s.Actions[i].Ops = slices.Clone(s.Actions[i].Ops)
	s.Actions[i].Ops[1].Microbatch = 3
	wantVerifyError(t, ss, "mismatch", "arrives as (m1,c0) on rank 1", "recv_prev(m3,c0)")
}

// TestVerifyWrapAround checks the ring: the last rank's activation of
// chunk 0 arrives on rank 0 as chunk 1, so a receive labelled otherwise is
// caught.
func TestVerifyWrapAround(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 4, VPP: 2, Microbatches: 8})
	s := ss[0]
	i := actionIndex(s, func(a Action) bool {
		return a.Kind == Comm && slices.ContainsFunc(a.Ops, func(o Op) bool { return o.Dir == RecvPrev })
	}, false)
	s.Actions[i].Ops = slices.Clone(s.Actions[i].Ops)
	for j, o := range s.Actions[i].Ops {
		if o.Dir == RecvPrev {
			s.Actions[i].Ops[j].Microbatch = 1
		}
	}
	wantVerifyError(t, ss, "mismatch", "rank 3", "send_next(m0,c0) arrives as (m0,c1) on rank 0", "recv_prev(m1,c1)")
}

func TestVerifyCatchesBackwardBeforeForward(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 1, Microbatches: 2})
	s := ss[0]
	s.Actions[1], s.Actions[2] = s.Actions[2], s.Actions[1] // F0 B0 → B0 F0
	wantVerifyError(t, ss, "order", "rank 0 step 1", "before its forward")
}

func TestVerifyCatchesMissingWait(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, VPP: 2, Microbatches: 4, OverlapP2PComm: true})
	s := ss[1]
	i := actionIndex(s, func(a Action) bool { return a.Kind == Wait && a.Op.Dir == RecvPrev }, false)
	s.Actions = slices.Delete(s.Actions, i, i+1)
	wantVerifyError(t, ss, "order", "has not been waited for")
}

func TestVerifyCatchesMissingCompute(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, Microbatches: 4, ForwardOnly: true})
	s := ss[1]
	i := actionIndex(s, func(a Action) bool { return a.Kind == Forward }, true)
	s.Actions = slices.Delete(s.Actions, i, i+1)
	wantVerifyError(t, ss, "missing", "rank 1", "3 forwards")
}

func TestVerifyCatchesUnmatchedSend(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, Microbatches: 2})
	s := ss[0]
	s.Actions = append(s.Actions, Action{Kind: Comm, Call: "send_forward", Async: true, Ops: []Op{{Dir: SendNext, Microbatch: 0}}})
	wantVerifyError(t, ss, "order", "already issued")

	ss = mustBuildAll(t, Config{PP: 2, Microbatches: 1, ForwardOnly: true})
	i := actionIndex(ss[0], func(a Action) bool { return a.Kind == Comm }, false)
	ss[0].Actions[i].Async = true
	ss[1].Actions = nil
	wantVerifyError(t, ss, "unmatched", "rank 0 step 2: send_next(m0,c0) to rank 1 never met a receive")
}

func TestVerifyCatchesEarlyGradSync(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, Microbatches: 4})
	s := ss[0]
	s.Actions = slices.Delete(s.Actions, 0, 1) // no no_sync: every backward reduces
	wantVerifyError(t, ss, "sync", "rank 0 step 4", "outside no_sync")
}

func TestVerifyNoCommWithoutPipeline(t *testing.T) {
	s := NoPipelining(2, false)
	s.Actions = append(s.Actions, Action{Kind: Comm, Call: "send_forward", Ops: []Op{{Dir: SendNext}}})
	wantVerifyError(t, []*Schedule{s}, "config", "no peer")
}

func TestVerifyRejectsMixedSchedules(t *testing.T) {
	a := mustBuildAll(t, Config{PP: 2, Microbatches: 4})
	b := mustBuildAll(t, Config{PP: 2, Microbatches: 5})
	wantVerifyError(t, []*Schedule{a[0], b[1]}, "config")
}

// TestVerifySharedPairFIFO moves rank 0's backward exchange after the next
// forward one (PP2, V2, overlap): with separate queues for activations and
// gradients nothing changes, but in comm's single queue per pair of ranks
// the gradient now meets the peer's activation receive.
func TestVerifySharedPairFIFO(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, VPP: 2, Microbatches: 4, OverlapP2PComm: true})
	if _, err := VerifyWith(ss, VerifyOptions{SharedPairFIFO: true}); err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	b := actionIndex(s, func(a Action) bool { return a.Kind == Backward }, false)
	a := s.Actions[b+1] // {sp0.1 rn1.1}, then F3.0, {rp2.1 sn3.0}
	s.Actions = slices.Delete(s.Actions, b+1, b+2)
	s.Actions = slices.Insert(s.Actions, b+3, a)
	if _, err := Verify(ss); err != nil {
		t.Fatalf("separate queues: %v", err)
	}
	_, err := VerifyWith(ss, VerifyOptions{SharedPairFIFO: true})
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Kind != "mismatch" || !strings.Contains(err.Error(), "a gradient and an activation cross") {
		t.Fatalf("got %v, want a crossing", err)
	}
}

// TestVerifyCatchesBrokenSplit: in a split schedule (ZB-H1, PP 2, M 4) a W
// before its B, a W twice, a missing W, no_sync left before an earlier
// W, and a W in a schedule whose backward is not split are each refused.
func TestVerifyCatchesBrokenSplit(t *testing.T) {
	zb := func() []*Schedule { return mustBuildAll(t, Config{PP: 2, Microbatches: 4, Schedule: ScheduleZBH1}) }
	isW := func(m int) func(Action) bool {
		return func(a Action) bool { return a.Kind == WeightGrad && a.Microbatch == m }
	}

	ss := zb()
	s := ss[0]
	i := actionIndex(s, isW(0), false)
	w := s.Actions[i]
	s.Actions = slices.Insert(slices.Delete(s.Actions, i, i+1), 1, w) // W0 right after no_sync
	wantVerifyError(t, ss, "order", "weight gradients of (m0,c0) before its backward")

	ss = zb()
	s = ss[1]
	i = actionIndex(s, isW(1), false)
	s.Actions = slices.Insert(s.Actions, i, s.Actions[i])
	wantVerifyError(t, ss, "order", "weight gradients of (m1,c0) a second time")

	ss = zb()
	s = ss[0]
	i = actionIndex(s, isW(3), false)
	s.Actions = slices.Delete(s.Actions, i, i+1)
	wantVerifyError(t, ss, "missing", "3 weight gradients, want one after each of the 4 backwards")

	ss = zb()
	s = ss[1]
	sync := actionIndex(s, func(a Action) bool { return a.Kind == EnableGradSync }, false)
	s.Actions = slices.Delete(s.Actions, sync, sync+1)
	i = actionIndex(s, isW(0), false)
	s.Actions = slices.Insert(s.Actions, i, Action{Kind: EnableGradSync})
	wantVerifyError(t, ss, "sync", "weight gradient 1 of chunk 0's 4")

	ss = mustBuildAll(t, Config{PP: 2, Microbatches: 4})
	s = ss[0]
	i = actionIndex(s, func(a Action) bool { return a.Kind == Backward }, false)
	s.Actions = slices.Insert(s.Actions, i+1, Action{Kind: WeightGrad, Microbatch: 0})
	wantVerifyError(t, ss, "order", "not split")
}
