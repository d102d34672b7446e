package comm

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The operation names that errors carry, one per Group method (async forms
// share the name of their blocking form).
const (
	OpAllReduce      = "AllReduce"
	OpReduceScatter  = "ReduceScatter"
	OpReduceScatterV = "ReduceScatterV"
	OpAllGather      = "AllGather"
	OpAllGatherV     = "AllGatherV"
	OpBroadcast      = "Broadcast"
	OpAllToAll       = "AllToAll"
	OpAllToAllV      = "AllToAllV"
	OpBarrier        = "Barrier"
	OpNewSubgroups   = "NewSubgroups"
	OpSend           = "Send"
	OpRecv           = "Recv"
)

// ErrTimeout is the Cause of a *TimeoutError whose wait outlived
// Options.Timeout. errors.Is(ErrTimeout, context.DeadlineExceeded) is true.
var ErrTimeout error = timeoutCause{}

type timeoutCause struct{}

func (timeoutCause) Error() string {
	return "comm.Options.Timeout (--distributed-timeout-minutes) elapsed"
}

func (timeoutCause) Is(target error) bool { return target == context.DeadlineExceeded }

// GroupLabel formats a group for messages: its name and global ranks, as
// `"dp" [0 2 4 6]`, eliding the middle of groups larger than 16.
func GroupLabel(name string, globalRanks []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q [", name)
	for i, r := range globalRanks {
		if len(globalRanks) > 16 && i == 8 {
			fmt.Fprintf(&b, " … (%d ranks) …", len(globalRanks)-12)
		}
		if len(globalRanks) > 16 && i >= 8 && i < len(globalRanks)-4 {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, r)
	}
	b.WriteByte(']')
	return b.String()
}

// MemberStatus is what a member of a group was doing when another member's
// wait ended.
type MemberStatus int

// The member statuses.
const (
	StatusUnknown    MemberStatus = iota // the backend cannot tell
	StatusArrived                        // it had issued the same operation
	StatusNotArrived                     // it had not issued the operation yet
	StatusFailed                         // its rank had failed (Err says why)
	StatusExited                         // its rank had returned without issuing it
)

// String returns a phrase for messages: "arrived", "has not arrived", ….
func (s MemberStatus) String() string {
	switch s {
	case StatusArrived:
		return "arrived"
	case StatusNotArrived:
		return "has not arrived"
	case StatusFailed:
		return "failed"
	case StatusExited:
		return "exited without issuing it"
	}
	return "state unknown"
}

// MemberState is the state of one member of a group as seen by a waiting
// member: a row of a TimeoutError's report.
type MemberState struct {
	Rank       int          // group rank
	GlobalRank int          // world rank
	Status     MemberStatus // relative to the waited-for operation
	// LastOp and LastSeq name the last operation the member issued on the
	// same group (for point-to-point, on the same ordered pair); LastOp is
	// "" when it issued none.
	LastOp  string
	LastSeq uint64
	// Doing describes what the member was blocked in at the time, on any
	// group ("" when not blocked or unknown), e.g.
	// `Recv #0 from rank 0 on group "pp" [0 4]`.
	Doing string
	Err   error // the failure, when Status is StatusFailed
}

// String returns the row as printed in a TimeoutError.
func (m MemberState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d (global %d): %v", m.Rank, m.GlobalRank, m.Status)
	if m.Status == StatusFailed && m.Err != nil {
		fmt.Fprintf(&b, ": %v", m.Err)
	}
	if m.Status == StatusNotArrived || m.Status == StatusExited {
		if m.LastOp == "" {
			b.WriteString("; issued nothing on this group yet")
		} else {
			fmt.Fprintf(&b, "; last issued %s #%d", m.LastOp, m.LastSeq)
		}
	}
	if m.Doing != "" {
		fmt.Fprintf(&b, "; blocked in %s", m.Doing)
	}
	return b.String()
}

// TimeoutError reports a wait that ended before its peers arrived: the hang
// report of one rank, naming the rank, the group, the operation, its
// sequence number, and what every other member was doing (PyTorch's flight
// recorder, done at the source). Unwrap returns Cause.
type TimeoutError struct {
	Group       string // group name
	GlobalRanks []int  // the group's members
	Rank        int    // the waiting member's group rank
	GlobalRank  int    // its world rank
	Op          string // one of the Op… names
	Seq         uint64 // the group's collective sequence number, or the pair's for Send and Recv
	Peer        int    // for Send and Recv, the peer's group rank; else -1
	Waited      time.Duration
	// Cause is ErrTimeout when Options.Timeout elapsed, else the context's
	// error (context.DeadlineExceeded or context.Canceled).
	Cause error
	// Members holds the state of every other member (for Send and Recv, of
	// the peer), in group-rank order.
	Members []MemberState
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "comm: %s on group %s at rank %d (global %d) gave up after %v: %v",
		e.opLabel(), GroupLabel(e.Group, e.GlobalRanks), e.Rank, e.GlobalRank, e.Waited.Round(time.Millisecond), e.Cause)
	for _, m := range e.Members {
		b.WriteString("\n\t")
		b.WriteString(m.String())
	}
	return b.String()
}

func (e *TimeoutError) opLabel() string {
	switch e.Op {
	case OpSend:
		return fmt.Sprintf("%s #%d to rank %d", e.Op, e.Seq, e.Peer)
	case OpRecv:
		return fmt.Sprintf("%s #%d from rank %d", e.Op, e.Seq, e.Peer)
	}
	return fmt.Sprintf("%s #%d", e.Op, e.Seq)
}

// Unwrap returns Cause.
func (e *TimeoutError) Unwrap() error { return e.Cause }

// PeerError reports that an operation could not complete because a rank of
// the world failed: it returned an error, panicked, or gave up waiting.
// Unwrap returns Cause, the failed rank's own error.
type PeerError struct {
	FailedRank int   // world rank of the failed member
	Cause      error // its error
	// Where the failure was noticed.
	Group      string
	GlobalRank int    // world rank of the member that noticed
	Op         string // "" when noticed outside an operation
	Seq        uint64
}

func (e *PeerError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("comm: rank %d: global rank %d failed: %v", e.GlobalRank, e.FailedRank, e.Cause)
	}
	return fmt.Sprintf("comm: %s #%d on group %q at global rank %d: global rank %d failed: %v",
		e.Op, e.Seq, e.Group, e.GlobalRank, e.FailedRank, e.Cause)
}

// Unwrap returns Cause.
func (e *PeerError) Unwrap() error { return e.Cause }

// MismatchError reports members of one operation that disagree: a send and
// its receive of different sizes, or collective calls whose dtype, length,
// root, reduction, counts or kind differ. Every member involved gets it.
type MismatchError struct {
	Group       string
	GlobalRanks []int
	Op          string // the reporting member's operation
	Seq         uint64
	What        string // "dtype and length", "root", "reduce op", "counts", "operation", …
	Rank        int    // group rank of one side
	Mine        string // its value
	Peer        int    // group rank of the other side
	PeerOp      string // the other side's operation
	Theirs      string // its value
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("comm: %s #%d on group %s: rank %d passed %s %s but rank %d passed %s to %s; the members of one operation must agree on its %s",
		e.Op, e.Seq, GroupLabel(e.Group, e.GlobalRanks), e.Rank, e.What, e.Mine, e.Peer, e.Theirs, e.PeerOp, e.What)
}

// ArgError reports an argument that a member can see is wrong on its own
// (a root or peer out of range, a length that does not fit). It is returned
// before anything is sent and consumes no sequence number.
type ArgError struct {
	Group       string
	GlobalRanks []int
	Rank        int    // the caller's group rank
	Op          string // one of the Op… names
	Msg         string // what is wrong and the fix
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("comm: %s on group %s at rank %d: %s", e.Op, GroupLabel(e.Group, e.GlobalRanks), e.Rank, e.Msg)
}

// PanicError is the error of a rank whose function panicked, in any backend:
// the panic is recovered and the rank fails with this error, so its peers
// stop with the cause instead of hanging.
type PanicError struct {
	Rank  int    // world rank
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("rank %d panicked: %v\n%s", e.Rank, e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
