package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gotron/gotron/comm"
)

func errorCases() []Case {
	return []Case{
		{Name: "BadArguments", Rank: badArguments},
		{Name: "MismatchedLengths", MinSize: 2, Mismatches: true, Rank: mismatchedLengths},
		{Name: "MismatchedOps", MinSize: 2, Mismatches: true, Rank: mismatchedOps},
		{Name: "MismatchedMessage", MinSize: 2, Mismatches: true, Rank: mismatchedMessage},
		{Name: "Timeout", MinSize: 2, Failures: true, Rank: hang, Check: checkHang},
		{Name: "OptionsTimeout", MinSize: 2, Failures: true, Options: comm.Options{Timeout: 100 * time.Millisecond},
			Rank: optionsTimeout, Check: checkOptionsTimeout},
		{Name: "RankFails", MinSize: 2, Failures: true, Rank: rankFails, Check: checkRankFails},
		{Name: "RankPanics", MinSize: 2, Failures: true, Rank: rankPanics, Check: checkRankPanics},
		{Name: "RankExits", MinSize: 2, Failures: true, Rank: rankExits, Check: checkRankExits},
	}
}

// wantArgError checks that err is a *comm.ArgError about op whose message
// mentions every word of words.
func wantArgError(g comm.Group, call string, err error, op string, words ...string) error {
	var ae *comm.ArgError
	if !errors.As(err, &ae) || ae.Op != op {
		return failf(g, "%s returned %v, want a *comm.ArgError for %s", call, err, op)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			return failf(g, "%s: error %q does not mention %q", call, err, w)
		}
	}
	return nil
}

// badArguments passes, on every rank alike, arguments a rank can see are
// wrong; each call must fail alone, consume nothing, and leave the group
// working.
func badArguments(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	f := comm.F32(make([]float32, 4))
	checks := []struct {
		call  string
		err   error
		op    string
		words []string
	}{
		{"Broadcast(root n)", g.Broadcast(ctx, f, n), comm.OpBroadcast, []string{"root", fmt.Sprint(n)}},
		{"Broadcast(root -1)", g.Broadcast(ctx, f, -1), comm.OpBroadcast, []string{"root -1"}},
		{"Send(peer n)", g.Send(ctx, f, n), comm.OpSend, []string{"peer", fmt.Sprint(n)}},
		{"Recv(self)", g.Recv(ctx, f, r), comm.OpRecv, []string{"itself"}},
		{"AllReduce(zero Buffer)", g.AllReduce(ctx, comm.Buffer{}, comm.Sum), comm.OpAllReduce, []string{"zero Buffer"}},
		{"AllReduce(bad op)", g.AllReduce(ctx, f, comm.ReduceOp(9)), comm.OpAllReduce, []string{"ReduceOp(9)"}},
		{"ReduceScatter(wrong in)", g.ReduceScatter(ctx, comm.F32(make([]float32, 2)), comm.F32(make([]float32, 2*n+1)), comm.Sum),
			comm.OpReduceScatter, []string{"len(in)", fmt.Sprint(2*n + 1)}},
		{"ReduceScatter(dtypes)", g.ReduceScatter(ctx, comm.I64(make([]int64, 1)), comm.F32(make([]float32, n)), comm.Sum),
			comm.OpReduceScatter, []string{"int64", "float32"}},
		{"AllGather(wrong out)", g.AllGather(ctx, comm.F32(make([]float32, n+1)), comm.F32(make([]float32, 1))),
			comm.OpAllGather, []string{"len(out)"}},
		{"AllGatherV(counts)", g.AllGatherV(ctx, f, f, make([]int, n+1)), comm.OpAllGatherV, []string{"counts"}},
		{"AllToAll(uneven)", g.AllToAll(ctx, comm.F32(make([]float32, n)), comm.F32(make([]float32, n+1))),
			comm.OpAllToAll, []string{"equal"}},
	}
	_, err := g.NewSubgroups(ctx, "dup", [][]int{{0}, {0}})
	checks = append(checks, struct {
		call  string
		err   error
		op    string
		words []string
	}{"NewSubgroups(duplicate)", err, comm.OpNewSubgroups, []string{"rank 0"}})
	for _, c := range checks {
		if err := wantArgError(g, c.call, c.err, c.op, c.words...); err != nil {
			return err
		}
	}
	if _, err := g.AllReduceAsync(ctx, comm.Buffer{}, comm.Sum); err == nil {
		return failf(g, "AllReduceAsync(zero Buffer) returned no error")
	}
	if _, err := g.BatchP2P(ctx, []comm.P2POp{{Kind: comm.Isend, Buf: f, Peer: n}}); err == nil {
		return failf(g, "BatchP2P with peer %d returned no error", n)
	}
	// The group still works and its sequence numbers still agree.
	return checkAllReduce(ctx, g, comm.Float32, comm.Sum, 80, 10)
}

// wantMismatch checks that err is a *comm.MismatchError naming rank a and
// another rank, which must be b unless b < 0.
func wantMismatch(g comm.Group, call string, err error, a, b int) error {
	var me *comm.MismatchError
	if !errors.As(err, &me) {
		return failf(g, "%s returned %v, want a *comm.MismatchError", call, err)
	}
	other := me.Peer
	if me.Peer == a {
		other = me.Rank
	} else if me.Rank != a {
		other = -1
	}
	if other == a || other < 0 || b >= 0 && other != b {
		return failf(g, "%s: the mismatch names ranks %d and %d, want %d and another: %v", call, me.Rank, me.Peer, a, err)
	}
	return nil
}

// mismatchedLengths: the last rank passes a longer buffer; every rank must
// get the mismatch naming it, and the group must work afterwards.
func mismatchedLengths(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	l := 4
	if r == n-1 {
		l = 5
	}
	err := g.AllReduce(ctx, comm.F32(make([]float32, l)), comm.Sum)
	if err := wantMismatch(g, "AllReduce with uneven lengths", err, n-1, -1); err != nil {
		return err
	}
	return checkAllReduce(ctx, g, comm.BFloat16, comm.Avg, 81, 11)
}

// mismatchedOps: rank 0 broadcasts while the others all-reduce, then every
// rank broadcasts with a different root.
func mismatchedOps(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	f := comm.F32(make([]float32, 3))
	var err error
	if r == 0 {
		err = g.Broadcast(ctx, f, 0)
	} else {
		err = g.AllReduce(ctx, f, comm.Sum)
	}
	if err := wantMismatch(g, "Broadcast against AllReduce", err, 0, -1); err != nil {
		return err
	}
	err = g.Broadcast(ctx, f, min(r, 1))
	if err := wantMismatch(g, "Broadcast with different roots", err, 0, -1); err != nil {
		return err
	}
	return checkAllReduce(ctx, g, comm.Int64, comm.Max, 82, n)
}

// mismatchedMessage: rank 0 sends 3 elements, rank 1 expects 4; both must
// get the mismatch, and the pair must work afterwards.
func mismatchedMessage(ctx context.Context, g comm.Group) error {
	var err error
	switch g.Rank() {
	case 0:
		err = g.Send(ctx, comm.F32(make([]float32, 3)), 1)
	case 1:
		err = g.Recv(ctx, comm.F32(make([]float32, 4)), 0)
	default:
		return nil
	}
	if err := wantMismatch(g, "Send/Recv of different lengths", err, 0, 1); err != nil {
		return err
	}
	for _, w := range []string{"float32[3]", "float32[4]"} {
		if !strings.Contains(err.Error(), w) {
			return failf(g, "mismatch error %q does not mention %q", err, w)
		}
	}
	if g.Rank() == 0 {
		return g.Send(ctx, message(83, 0, 1, 2), 1)
	}
	buf := recvInto(83, 0, 1, 2)
	if err := g.Recv(ctx, buf, 0); err != nil {
		return err
	}
	if err := same("Recv after a mismatch", buf, message(83, 0, 1, 2)); err != nil {
		return failf(g, "%v", err)
	}
	return nil
}

// hang: after two all-reduces, rank 0 waits in a third that rank 1 never
// joins (it waits in a Recv from rank 0 instead); rank 0's context ends the
// wait. Rank 0 must report the hang with every member's state; the others
// must fail promptly naming rank 0.
func hang(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	for i := range 2 {
		if err := checkAllReduce(ctx, g, comm.Float32, comm.Sum, uint64(90+i), 5); err != nil {
			return err
		}
	}
	f := comm.F32(make([]float32, 5))
	switch r {
	case 0:
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := g.AllReduce(wctx, f, comm.Sum)
		var te *comm.TimeoutError
		if !errors.As(err, &te) {
			return failf(g, "AllReduce #2 returned %v, want a *comm.TimeoutError", err)
		}
		if err := checkTimeoutError(g, te, n); err != nil {
			return err
		}
		return te
	case 1:
		err := g.Recv(ctx, f, 0)
		return wantPeerError(g, "Recv while rank 0 hangs", err, 0)
	default:
		err := g.AllReduce(ctx, f, comm.Sum)
		return wantPeerError(g, "AllReduce #2 while rank 0 hangs", err, 0)
	}
}

func checkTimeoutError(g comm.Group, te *comm.TimeoutError, n int) error {
	if te.Op != comm.OpAllReduce || te.Seq != 2 || te.Rank != 0 || te.GlobalRank != g.GlobalRanks()[0] ||
		te.Group != g.Name() || te.Peer != -1 || !errors.Is(te, context.DeadlineExceeded) {
		return failf(g, "TimeoutError names %s #%d at rank %d (global %d) of %q, peer %d, cause %v; want AllReduce #2 at rank 0 of %q, peer -1, cause context.DeadlineExceeded",
			te.Op, te.Seq, te.Rank, te.GlobalRank, te.Group, te.Peer, te.Cause, g.Name())
	}
	if len(te.Members) != n-1 {
		return failf(g, "TimeoutError reports %d members, want %d: %v", len(te.Members), n-1, te)
	}
	for i, m := range te.Members {
		if m.Rank != i+1 {
			return failf(g, "TimeoutError member %d is rank %d, want %d", i, m.Rank, i+1)
		}
		switch {
		case m.Rank == 1:
			if m.Status != comm.StatusNotArrived || m.LastOp != comm.OpAllReduce || m.LastSeq != 1 {
				return failf(g, "rank 1's state is %q, want not arrived, last issued AllReduce #1", m)
			}
			if m.Doing != "" && !strings.Contains(m.Doing, "Recv #0 from rank 0") {
				return failf(g, "rank 1 is reported blocked in %q, want Recv #0 from rank 0", m.Doing)
			}
		case m.Status == comm.StatusArrived:
		case m.Status == comm.StatusNotArrived && m.LastOp == comm.OpAllReduce && m.LastSeq >= 1:
		default:
			return failf(g, "rank %d's state is %q, want arrived or about to", m.Rank, m)
		}
	}
	msg := te.Error()
	for _, w := range []string{"AllReduce #2", fmt.Sprintf("%q", g.Name()), "rank 1 (global 1): has not arrived", "last issued AllReduce #1"} {
		if !strings.Contains(msg, w) {
			return failf(g, "TimeoutError message does not mention %q:\n%s", w, msg)
		}
	}
	return nil
}

// wantPeerError checks that err is a *comm.PeerError naming global rank
// failed; it returns err itself when so (a rank returns the error it got).
func wantPeerError(g comm.Group, call string, err error, failed int) error {
	var pe *comm.PeerError
	if !errors.As(err, &pe) || pe.FailedRank != failed {
		return failf(g, "%s returned %v, want a *comm.PeerError naming global rank %d", call, err, failed)
	}
	return err
}

func checkHang(n int, err error) error {
	var te *comm.TimeoutError
	if !errors.As(err, &te) || te.GlobalRank != 0 {
		return errors.New("want the root cause to be rank 0's *comm.TimeoutError")
	}
	return nil
}

// optionsTimeout: rank 0 waits in an AllReduce the others never join (they
// wait in a Recv from rank 0) until comm.Options.Timeout ends someone's
// wait. Either side may give up first.
func optionsTimeout(ctx context.Context, g comm.Group) error {
	f := comm.F32(make([]float32, 2))
	var err error
	if g.Rank() == 0 {
		err = g.AllReduce(ctx, f, comm.Sum)
	} else {
		err = g.Recv(ctx, f, 0)
	}
	var te *comm.TimeoutError
	var pe *comm.PeerError
	switch {
	case errors.As(err, &te):
		if !errors.Is(err, comm.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			return failf(g, "TimeoutError's cause is %v, want comm.ErrTimeout", te.Cause)
		}
	case errors.As(err, &pe):
	default:
		return failf(g, "got %v, want a *comm.TimeoutError or a *comm.PeerError", err)
	}
	return err
}

func checkOptionsTimeout(n int, err error) error {
	var te *comm.TimeoutError
	if !errors.As(err, &te) || !errors.Is(te.Cause, comm.ErrTimeout) {
		return errors.New("want the root cause to be a *comm.TimeoutError caused by comm.ErrTimeout")
	}
	if !(te.Op == comm.OpAllReduce && te.GlobalRank == 0 || te.Op == comm.OpRecv && te.Peer == 0) {
		return fmt.Errorf("the root cause names %s at rank %d", te.Op, te.GlobalRank)
	}
	return nil
}

var errBoom = errors.New("boom: the rank's own error")

// rankFails: the last rank fails after one all-reduce, while the others
// are in the next one (or about to be); they must fail naming it, and so
// must any later call.
func rankFails(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	if err := checkAllReduce(ctx, g, comm.Float32, comm.Sum, 95, 6); err != nil {
		return err
	}
	if r == n-1 {
		return errBoom
	}
	err := g.AllReduce(ctx, comm.F32(make([]float32, 6)), comm.Sum)
	if err := wantPeerError(g, "AllReduce with a failed rank", err, n-1); err != nil && !errors.Is(err, errBoom) {
		return err
	}
	err = g.Barrier(ctx)
	return wantPeerError(g, "Barrier after a rank failed", err, n-1)
}

func checkRankFails(n int, err error) error {
	if !errors.Is(err, errBoom) {
		return errors.New("want the root cause to be the failed rank's error")
	}
	if c := strings.Count(err.Error(), "boom"); c != 1 {
		return fmt.Errorf("the failed rank's error appears %d times, want once", c)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("rank %d", n-1)) {
		return fmt.Errorf("the error does not name rank %d", n-1)
	}
	return nil
}

// rankPanics: the last rank panics while the others wait in an all-reduce.
func rankPanics(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	if r == n-1 {
		panicInRank()
	}
	err := g.AllReduce(ctx, comm.F32(make([]float32, 6)), comm.Sum)
	return wantPeerError(g, "AllReduce with a panicked rank", err, n-1)
}

func panicInRank() { panic("kaboom") }

func checkRankPanics(n int, err error) error {
	msg := fmt.Sprint(err)
	for _, w := range []string{"kaboom", "panicInRank", fmt.Sprintf("rank %d", n-1)} {
		if !strings.Contains(msg, w) {
			return fmt.Errorf("the error does not mention %q (the panic, its stack, the rank)", w)
		}
	}
	return nil
}

// rankExits: the last rank returns at once; the others' all-reduce can
// never complete and must fail naming it rather than wait for a timeout.
func rankExits(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	if r == n-1 {
		return nil
	}
	err := g.AllReduce(ctx, comm.F32(make([]float32, 6)), comm.Sum)
	return wantPeerError(g, "AllReduce without the last rank", err, n-1)
}

func checkRankExits(n int, err error) error {
	msg := fmt.Sprint(err)
	for _, w := range []string{fmt.Sprintf("rank %d", n-1), "returned"} {
		if !strings.Contains(msg, w) {
			return fmt.Errorf("the error does not mention %q (the rank that returned early)", w)
		}
	}
	return nil
}
