package p2p

import (
	"fmt"
	"strings"

	"github.com/gotron/gotron/comm"
)

// Error is a failed message of an exchange: which call, which op, between
// which stages, and the comm error (a *comm.PeerError, *comm.TimeoutError,
// *comm.MismatchError, … reachable with errors.As).
type Error struct {
	// Call is the communicator method in the reference's spelling
	// ("send_forward_recv_backward", "communicate", …).
	Call string
	// Shapes is true when the failure was in the shape exchange that
	// precedes the tensors (variable_seq_lengths, mtp_standalone).
	Shapes bool
	// Dir is the op whose wait failed; With are the other ops of the same
	// comm batch, whose failure cannot be told apart from Dir's.
	Dir  Dir
	With []Dir
	// Group labels the pipeline group, as `"pp" [1 3 5 7]`.
	Group string
	// Stage and GlobalRank are this rank's group and world ranks; Prev,
	// Next and their Global forms are its peers'.
	Stage, GlobalRank    int
	Prev, PrevGlobalRank int
	Next, NextGlobalRank int
	Err                  error
}

// Error reads, for instance,
//
//	p2p: send_forward_recv_backward: recv_next ← stage 2 (global rank 6)
//	[batched with send_next → stage 2 (global rank 6)], on stage 1 (global
//	rank 5) of "pp" [4 5 6 7]: comm: …
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "p2p: %s: ", e.Call)
	if e.Shapes {
		b.WriteString("shape exchange before the tensors: ")
	}
	b.WriteString(e.op(e.Dir))
	if len(e.With) > 0 {
		b.WriteString(" [batched with ")
		for i, d := range e.With {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.op(d))
		}
		b.WriteString("]")
	}
	fmt.Fprintf(&b, ", on stage %d (global rank %d) of %s: %v", e.Stage, e.GlobalRank, e.Group, e.Err)
	return b.String()
}

// op describes one op with its peer: "recv_next ← stage 2 (global rank 6)".
func (e *Error) op(d Dir) string {
	arrow, peer, global := "←", e.Prev, e.PrevGlobalRank
	if d.IsSend() {
		arrow = "→"
	}
	if d == SendNext || d == RecvNext {
		peer, global = e.Next, e.NextGlobalRank
	}
	return fmt.Sprintf("%v %s stage %d (global rank %d)", d, arrow, peer, global)
}

// Unwrap returns the comm error.
func (e *Error) Unwrap() error { return e.Err }

// The phases of an exchange, for errors.
const (
	phaseData   = false
	phaseShapes = true
)

// opError wraps err, the failure of op d (batched with the ops with) of
// call, in an *Error.
func (c *Communicator) opError(call string, shapes bool, d Dir, with []Dir, err error) error {
	gr := c.g.GlobalRanks()
	return &Error{
		Call: call, Shapes: shapes, Dir: d, With: with,
		Group: comm.GroupLabel(c.g.Name(), gr),
		Stage: c.rank, GlobalRank: gr[c.rank],
		Prev: c.prev, PrevGlobalRank: gr[c.prev],
		Next: c.next, NextGlobalRank: gr[c.next],
		Err: err,
	}
}
