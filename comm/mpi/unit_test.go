//go:build mpi

package mpi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

func TestEvenSplit(t *testing.T) {
	for _, tc := range []struct{ l, n int }{{0, 1}, {0, 3}, {1, 4}, {7, 2}, {10, 4}, {1003, 7}} {
		counts, displs := evenSplit(tc.l, tc.n)
		total := 0
		for k := range tc.n {
			if displs[k] != total {
				t.Errorf("evenSplit(%d, %d): displs[%d] = %d, want %d", tc.l, tc.n, k, displs[k], total)
			}
			// Chunks differ by at most one element, longer ones first.
			if counts[k] != tc.l/tc.n && counts[k] != tc.l/tc.n+1 || k > 0 && counts[k] > counts[k-1] {
				t.Errorf("evenSplit(%d, %d) = %v: not an even split", tc.l, tc.n, counts)
			}
			total += counts[k]
		}
		if total != tc.l {
			t.Errorf("evenSplit(%d, %d) = %v sums to %d", tc.l, tc.n, counts, total)
		}
	}
}

// TestSplitHashes checks the AllToAllV consistency sums against a direct
// comparison of the split matrix, for agreeing and disagreeing splits.
func TestSplitHashes(t *testing.T) {
	const n = 4
	var send, recv [n][n]int
	for j := range n {
		for k := range n {
			send[j][k] = (j*3 + k*5) % 7
			recv[k][j] = send[j][k]
		}
	}
	sums := func() (s, r uint64) {
		for j := range n {
			hs, hr := splitHashes(j, send[j][:], recv[j][:])
			s, r = s+hs, r+hr
		}
		return s, r
	}
	if s, r := sums(); s != r {
		t.Fatalf("agreeing splits: sums %#x and %#x differ", s, r)
	}
	for j := range n {
		for k := range n {
			recv[k][j]++
			if s, r := sums(); s == r {
				t.Errorf("recvCounts[%d] of rank %d off by one: the sums still agree", j, k)
			}
			recv[k][j]--
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct{ elapsed, busy, want time.Duration }{
		{0, busyFor, noPause},
		{busyFor - 1, busyFor, noPause},
		{busyFor, busyFor, 0},
		{0, 0, 0},
		{yieldFor - 1, busyFor, 0},
	} {
		if d := backoff(c.elapsed, c.busy); d != c.want {
			t.Errorf("backoff(%v, %v) = %v, want %v", c.elapsed, c.busy, d, c.want)
		}
	}
	for _, e := range []time.Duration{yieldFor, time.Millisecond, 3 * time.Millisecond, time.Second, time.Hour} {
		d := backoff(e, busyFor)
		want := min(max(e/8, minSleep), maxSleep)
		if d != want || d < minSleep || d > maxSleep {
			t.Errorf("backoff(%v) = %v, want %v within [%v, %v]", e, d, want, minSleep, maxSleep)
		}
	}
	if busyPolling(1) != busyFor || busyPolling(runtime.NumCPU()+1) != 0 {
		t.Errorf("busyPolling: %v for one rank, %v for more ranks than CPUs; want %v and 0",
			busyPolling(1), busyPolling(runtime.NumCPU()+1), busyFor)
	}
}

var errSentinel = errors.New("the sentinel")

// TestWireErrors sends errors through a notice's encoding and checks that
// errors.Is and errors.As see on the receiving side what they see on the
// sending side.
func TestWireErrors(t *testing.T) {
	te := &comm.TimeoutError{Group: "dp", GlobalRanks: []int{0, 2}, Rank: 1, GlobalRank: 2, Op: comm.OpRecv, Seq: 4, Peer: 0,
		Waited: 3 * time.Second, Cause: comm.ErrTimeout,
		Members: []comm.MemberState{{Rank: 0, GlobalRank: 0, Status: comm.StatusFailed, Err: errSentinel, Doing: "x"}}}
	pe := &comm.PeerError{FailedRank: 3, Cause: fmt.Errorf("wrapped: %w", errSentinel), Group: "tp", GlobalRank: 1, Op: comm.OpBarrier, Seq: 9}
	cases := []struct {
		name string
		err  error
		is   []error
	}{
		{"sentinel", fmt.Errorf("step 3: %w", errSentinel), []error{errSentinel}},
		{"timeout", fmt.Errorf("train: %w", te), []error{comm.ErrTimeout, context.DeadlineExceeded}},
		{"ctx", &comm.TimeoutError{Op: comm.OpBarrier, Cause: context.Canceled}, []error{context.Canceled}},
		{"peer", pe, []error{errSentinel}},
		{"panic", &comm.PanicError{Rank: 1, Value: "kaboom", Stack: []byte("stack")}, nil},
		{"joined", errors.Join(errors.New("a"), errSentinel), []error{errSentinel}},
	}
	for _, c := range cases {
		got := encodeError(c.err).decode(5)
		if got.Error() != c.err.Error() {
			t.Errorf("%s: text %q, want %q", c.name, got.Error(), c.err.Error())
		}
		for _, target := range c.is {
			if !errors.Is(got, target) {
				t.Errorf("%s: errors.Is(decoded, %v) is false", c.name, target)
			}
		}
		if errors.Is(got, errors.New("unrelated")) {
			t.Errorf("%s: matches an unrelated error", c.name)
		}
	}
	var gotTE *comm.TimeoutError
	if !errors.As(encodeError(te).decode(2), &gotTE) || gotTE.Error() != te.Error() || gotTE.Seq != 4 || gotTE.Peer != 0 {
		t.Errorf("decoded TimeoutError %+v, want %+v", gotTE, te)
	}
	var gotPE *comm.PeerError
	if !errors.As(encodeError(pe).decode(1), &gotPE) || gotPE.FailedRank != 3 || gotPE.Error() != pe.Error() {
		t.Errorf("decoded PeerError %+v, want %+v", gotPE, pe)
	}
	// Passing a RemoteError on keeps the original chain's texts.
	again := encodeError(encodeError(cases[0].err).decode(5)).decode(6)
	if !errors.Is(again, errSentinel) {
		t.Errorf("a RemoteError passed on lost its chain: %#v", again)
	}
	w := encodeError(&comm.PanicError{Rank: 1, Value: "x", Stack: make([]byte, 1<<20)})
	w.fit(4096)
	if b, _ := json.Marshal(w); len(b) > 4096 {
		t.Errorf("fit(4096) left %d bytes", len(b))
	}
}

// TestRunErrorText: the earliest failure, then what this rank did: a
// peer's failure stopped it, it failed the same way (said once), or it
// failed otherwise.
func TestRunErrorText(t *testing.T) {
	root := &RemoteError{Rank: 1, Msg: "invalid arguments: --lr NaN"}
	for _, c := range []struct {
		this error
		want string
	}{
		{nil, "mpi: rank 1 failed: invalid arguments: --lr NaN"},
		{&comm.PeerError{}, "mpi: rank 1 failed: invalid arguments: --lr NaN\n(rank 0 stopped because of it)"},
		{errors.New("invalid arguments: --lr NaN"), "mpi: rank 1 failed: invalid arguments: --lr NaN (rank 0 too)"},
		{errors.New("disk full"), "mpi: rank 1 failed: invalid arguments: --lr NaN\n(rank 0 also failed: disk full)"},
	} {
		e := &RunError{Rank: 1, Err: root, ThisRank: 0, ThisErr: c.this}
		if got := e.Error(); got != c.want {
			t.Errorf("this rank's error %v: %q, want %q", c.this, got, c.want)
		}
	}
}
