package comm

import (
	"context"
	"fmt"
)

// ReduceOp names the element-wise reduction of a collective, as
// torch.distributed.ReduceOp does.
//
// Every backend reduces in a fixed order so results are bitwise reproducible:
// element i of the result is
//
//	v = x₀[i] ⊕ x₁[i] ⊕ … ⊕ x_{n-1}[i]   (group ranks 0, 1, …, n-1, left to right)
//
// accumulated in float32 for BFloat16 and Float16 and rounded once to the
// buffer's type (round to nearest, ties to even). Avg is Sum followed by one
// division by n (in float32 for the float types, truncating integer division
// for Int64). Max and Min use Go's built-in max and min, so a NaN in any
// operand makes the result NaN (which NaN payload is unspecified).
type ReduceOp int

// The reductions.
const (
	Sum ReduceOp = iota // Σ xₖ
	Avg                 // (Σ xₖ) / n
	Max                 // maxₖ xₖ
	Min                 // minₖ xₖ
)

// String returns "sum", "avg", "max" or "min" (torch's spellings), or
// "ReduceOp(n)" for an invalid value.
func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}

// Valid reports whether op is one of the named reductions.
func (op ReduceOp) Valid() bool { return op >= Sum && op <= Min }

// Group is one rank's handle on a group of ranks, the Go form of a
// torch.distributed ProcessGroup as Megatron-Core uses it (tp, dp, pp, cp, ep
// groups and the world).
//
// Ranks passed to and returned by a Group are group ranks, 0 ≤ r < Size();
// GlobalRanks maps them to world ranks.
//
// # Ordering
//
// Collectives (every method but Send, Recv, their async forms and BatchP2P)
// must be issued in the same order, with matching arguments, by every member
// of the group, as with MPI and NCCL. Each Group numbers its collectives with
// one sequence number, starting at 0 and shared by all kinds; errors name it.
// An operation is issued when its method is called, so async operations match
// by the order of their calls, not of their Waits. The calls on one Group
// value must be ordered by the caller (one goroutine at a time, or
// synchronised); distinct groups may be used concurrently from different
// goroutines.
//
// Point-to-point messages between an ordered pair of ranks are matched first
// in, first out: the k-th send from a to b is received by b's k-th receive
// from a. Each pair has its own sequence number. A send and its receive must
// agree in dtype and length; otherwise both sides get an error naming both
// ranks and both buffers.
//
// # Buffers
//
// A blocking call does not return before the backend has finished with its
// buffers. An async call owns its buffers until Wait returns: the caller must
// not read or write them before. Output buffers must not overlap input
// buffers unless the method says so.
//
// # Errors and deadlines
//
// Every blocking call takes a context and is also bounded by the backend's
// Options.Timeout (Megatron's --distributed-timeout-minutes). When either
// ends the wait first the call returns a *TimeoutError naming the rank, the
// group, the op, its sequence number and what every other member was doing.
// When a member of the world has failed, pending and later calls return a
// *PeerError naming that rank and its cause. Argument errors that the caller
// can see alone (a root out of range, len(in) ≠ Size()·len(out)) are reported
// before anything is sent, without consuming a sequence number; when every
// member passes the same bad argument every member gets the error. After a
// timeout or a peer failure the group is unusable; the error is meant to be
// returned up to the rank's top level.
//
// The async forms report argument errors, and a world that has already
// failed, at once with a nil Work; every other error comes from Work.Wait.
type Group interface {
	// Rank returns this rank's rank in the group, 0 ≤ Rank() < Size().
	Rank() int
	// Size returns the number of ranks in the group.
	Size() int
	// GlobalRanks returns the world ranks of the members, indexed by group
	// rank. The caller must not modify the slice.
	GlobalRanks() []int
	// Name returns the group's name ("world", "tp", "dp-cp", …), as given to
	// NewSubgroups. Errors print it with the global ranks.
	Name() string

	// AllReduce reduces buf element-wise over the group in place: afterwards
	// every member's buf holds op over all members' inputs (see ReduceOp for
	// the order). All members pass the same dtype and length.
	AllReduce(ctx context.Context, buf Buffer, op ReduceOp) error

	// ReduceScatter reduces in element-wise over the group and leaves chunk
	// Rank() of the result in out: len(in) = Size()·len(out), and
	//
	//	out[i] = op_k in_k[Rank()·len(out) + i]
	//
	// (torch.distributed.reduce_scatter_tensor).
	ReduceScatter(ctx context.Context, out, in Buffer, op ReduceOp) error

	// ReduceScatterV is ReduceScatter with uneven chunks: counts has Size()
	// entries, identical on every member; len(in) = Σ counts and
	// len(out) = counts[Rank()]. Chunk r starts at Σ_{k<r} counts[k].
	ReduceScatterV(ctx context.Context, out, in Buffer, counts []int, op ReduceOp) error

	// AllGather concatenates every member's in, in rank order, into out on
	// every member: len(out) = Size()·len(in), and out[k·len(in)+i] = in_k[i]
	// (torch.distributed.all_gather_into_tensor).
	AllGather(ctx context.Context, out, in Buffer) error

	// AllGatherV is AllGather with uneven pieces: counts has Size() entries,
	// identical on every member; len(in) = counts[Rank()] and
	// len(out) = Σ counts. Piece k starts at Σ_{j<k} counts[j].
	AllGatherV(ctx context.Context, out, in Buffer, counts []int) error

	// Broadcast copies root's buf into every other member's buf. All members
	// pass the same root, dtype and length.
	Broadcast(ctx context.Context, buf Buffer, root int) error

	// AllToAll exchanges equal chunks: len(in) = len(out) = Size()·c, and
	// chunk k of this rank's out is chunk Rank() of rank k's in
	// (torch.distributed.all_to_all_single with equal splits).
	AllToAll(ctx context.Context, out, in Buffer) error

	// AllToAllV exchanges uneven chunks: in is cut into Size() pieces of
	// sendCounts[k] elements, piece k going to rank k; out is cut into
	// pieces of recvCounts[k] elements, piece k coming from rank k. Rank j's
	// sendCounts[k] must equal rank k's recvCounts[j]
	// (all_to_all_single with input_split_sizes and output_split_sizes).
	AllToAllV(ctx context.Context, out, in Buffer, sendCounts, recvCounts []int) error

	// Barrier returns once every member has called it.
	Barrier(ctx context.Context) error

	// Send sends buf to group rank dst ≠ Rank(). It may block until the
	// matching Recv is posted (as MPI_Send may); post sends and receives
	// together with BatchP2P or the async forms to avoid a deadlock.
	Send(ctx context.Context, buf Buffer, dst int) error
	// Recv receives into buf the next message from group rank src ≠ Rank().
	// The message must have buf's dtype and length.
	Recv(ctx context.Context, buf Buffer, src int) error

	// AllReduceAsync issues AllReduce and returns at once.
	AllReduceAsync(ctx context.Context, buf Buffer, op ReduceOp) (Work, error)
	// ReduceScatterAsync issues ReduceScatter and returns at once.
	ReduceScatterAsync(ctx context.Context, out, in Buffer, op ReduceOp) (Work, error)
	// AllGatherAsync issues AllGather and returns at once.
	AllGatherAsync(ctx context.Context, out, in Buffer) (Work, error)
	// BroadcastAsync issues Broadcast and returns at once.
	BroadcastAsync(ctx context.Context, buf Buffer, root int) (Work, error)
	// SendAsync issues Send and returns at once (torch.distributed.isend).
	SendAsync(ctx context.Context, buf Buffer, dst int) (Work, error)
	// RecvAsync issues Recv and returns at once (torch.distributed.irecv).
	RecvAsync(ctx context.Context, buf Buffer, src int) (Work, error)
	// BatchP2P issues every op of ops, in slice order, and returns one Work
	// that completes when all have completed
	// (torch.distributed.batch_isend_irecv, as Megatron's P2P communicator
	// uses it). Within the batch, sends and receives to the same peer keep
	// their order; there is no order between different peers.
	BatchP2P(ctx context.Context, ops []P2POp) (Work, error)

	// NewSubgroups splits the group. It is a collective: every member calls
	// it with the same non-empty name and the same partition, a list of
	// subgroups each listing parent-group ranks; subgroup i's rank k is
	// parent rank partition[i][k]. A rank may appear in at most one
	// subgroup. Every subgroup is created on every call, in order (as
	// Megatron creates every group on every rank); the result is the
	// subgroup holding the caller, or nil (and no error) when no subgroup
	// holds it.
	NewSubgroups(ctx context.Context, name string, partition [][]int) (Group, error)
}

// Work is the handle of an async operation (torch.distributed's Work).
type Work interface {
	// Wait blocks until the operation has completed and returns its error.
	// The operation is bounded by the context it was issued with and by
	// Options.Timeout; ctx bounds only this wait. When ctx ends first, Wait
	// returns an error wrapping ctx.Err() and the operation keeps its
	// buffers; a later Wait may be called. Wait may be called any number of
	// times and from any goroutine; it returns the same error each time once
	// the operation has completed.
	Wait(ctx context.Context) error
}

// P2PKind says whether a P2POp sends or receives.
type P2PKind int

// The point-to-point kinds (torch.distributed.isend and irecv).
const (
	Isend P2PKind = iota
	Irecv
)

// String returns "isend" or "irecv".
func (k P2PKind) String() string {
	switch k {
	case Isend:
		return "isend"
	case Irecv:
		return "irecv"
	}
	return fmt.Sprintf("P2PKind(%d)", int(k))
}

// P2POp is one operation of a BatchP2P (torch.distributed.P2POp): send Buf
// to group rank Peer, or receive Buf from it.
type P2POp struct {
	Kind P2PKind
	Buf  Buffer
	Peer int
}
