package comm

import "fmt"

// The Check functions validate the arguments of one Group method as the
// calling member alone can, so that every backend reports the same
// *ArgError before sending anything. They return nil when the arguments are
// acceptable.

func argErr(g Group, op, format string, args ...any) error {
	return &ArgError{Group: g.Name(), GlobalRanks: g.GlobalRanks(), Rank: g.Rank(), Op: op, Msg: fmt.Sprintf(format, args...)}
}

func checkBuf(g Group, op, name string, b Buffer) error {
	if !b.dtype.Valid() {
		return argErr(g, op, "%s is a zero Buffer with no dtype; build it with comm.F32, BF16, F16 or I64", name)
	}
	return nil
}

func checkPair(g Group, op string, out, in Buffer) error {
	if err := checkBuf(g, op, "out", out); err != nil {
		return err
	}
	if err := checkBuf(g, op, "in", in); err != nil {
		return err
	}
	if out.dtype != in.dtype {
		return argErr(g, op, "out is %v but in is %v; pass buffers of one dtype", out.dtype, in.dtype)
	}
	return nil
}

func checkReduceOp(g Group, op string, r ReduceOp) error {
	if !r.Valid() {
		return argErr(g, op, "invalid %v; use comm.Sum, Avg, Max or Min", r)
	}
	return nil
}

// checkCounts checks that counts has one non-negative entry per member and
// returns their sum and the offset of this member's entry.
func checkCounts(g Group, op, name string, counts []int) (total, offset int, err error) {
	if len(counts) != g.Size() {
		return 0, 0, argErr(g, op, "len(%s) = %d but the group has %d members; pass one count per member", name, len(counts), g.Size())
	}
	for k, c := range counts {
		if c < 0 {
			return 0, 0, argErr(g, op, "%s[%d] = %d is negative", name, k, c)
		}
		if k < g.Rank() {
			offset += c
		}
		total += c
	}
	return total, offset, nil
}

// CheckAllReduce validates AllReduce's arguments.
func CheckAllReduce(g Group, buf Buffer, op ReduceOp) error {
	if err := checkBuf(g, OpAllReduce, "buf", buf); err != nil {
		return err
	}
	return checkReduceOp(g, OpAllReduce, op)
}

// CheckReduceScatter validates ReduceScatter's arguments:
// len(in) = Size()·len(out).
func CheckReduceScatter(g Group, out, in Buffer, op ReduceOp) error {
	if err := checkPair(g, OpReduceScatter, out, in); err != nil {
		return err
	}
	if err := checkReduceOp(g, OpReduceScatter, op); err != nil {
		return err
	}
	if in.Len() != g.Size()*out.Len() {
		return argErr(g, OpReduceScatter, "len(in) = %d is not Size()·len(out) = %d·%d = %d; pad in to a multiple of the group size or use ReduceScatterV",
			in.Len(), g.Size(), out.Len(), g.Size()*out.Len())
	}
	return nil
}

// CheckReduceScatterV validates ReduceScatterV's arguments:
// len(in) = Σ counts, len(out) = counts[Rank()].
func CheckReduceScatterV(g Group, out, in Buffer, counts []int, op ReduceOp) error {
	if err := checkPair(g, OpReduceScatterV, out, in); err != nil {
		return err
	}
	if err := checkReduceOp(g, OpReduceScatterV, op); err != nil {
		return err
	}
	total, _, err := checkCounts(g, OpReduceScatterV, "counts", counts)
	if err != nil {
		return err
	}
	if in.Len() != total {
		return argErr(g, OpReduceScatterV, "len(in) = %d but Σ counts = %d", in.Len(), total)
	}
	if out.Len() != counts[g.Rank()] {
		return argErr(g, OpReduceScatterV, "len(out) = %d but counts[%d] = %d", out.Len(), g.Rank(), counts[g.Rank()])
	}
	return nil
}

// CheckAllGather validates AllGather's arguments: len(out) = Size()·len(in).
func CheckAllGather(g Group, out, in Buffer) error {
	if err := checkPair(g, OpAllGather, out, in); err != nil {
		return err
	}
	if out.Len() != g.Size()*in.Len() {
		return argErr(g, OpAllGather, "len(out) = %d is not Size()·len(in) = %d·%d = %d; use AllGatherV for uneven pieces",
			out.Len(), g.Size(), in.Len(), g.Size()*in.Len())
	}
	return nil
}

// CheckAllGatherV validates AllGatherV's arguments:
// len(in) = counts[Rank()], len(out) = Σ counts.
func CheckAllGatherV(g Group, out, in Buffer, counts []int) error {
	if err := checkPair(g, OpAllGatherV, out, in); err != nil {
		return err
	}
	total, _, err := checkCounts(g, OpAllGatherV, "counts", counts)
	if err != nil {
		return err
	}
	if out.Len() != total {
		return argErr(g, OpAllGatherV, "len(out) = %d but Σ counts = %d", out.Len(), total)
	}
	if in.Len() != counts[g.Rank()] {
		return argErr(g, OpAllGatherV, "len(in) = %d but counts[%d] = %d", in.Len(), g.Rank(), counts[g.Rank()])
	}
	return nil
}

// CheckBroadcast validates Broadcast's arguments: 0 ≤ root < Size().
func CheckBroadcast(g Group, buf Buffer, root int) error {
	if err := checkBuf(g, OpBroadcast, "buf", buf); err != nil {
		return err
	}
	if root < 0 || root >= g.Size() {
		return argErr(g, OpBroadcast, "root %d is out of range [0, %d); roots are group ranks, not global ranks", root, g.Size())
	}
	return nil
}

// CheckAllToAll validates AllToAll's arguments: len(in) = len(out), a
// multiple of Size().
func CheckAllToAll(g Group, out, in Buffer) error {
	if err := checkPair(g, OpAllToAll, out, in); err != nil {
		return err
	}
	if in.Len() != out.Len() || in.Len()%g.Size() != 0 {
		return argErr(g, OpAllToAll, "len(in) = %d and len(out) = %d must be equal and divisible by the group size %d; use AllToAllV for uneven splits",
			in.Len(), out.Len(), g.Size())
	}
	return nil
}

// CheckAllToAllV validates AllToAllV's arguments: len(in) = Σ sendCounts,
// len(out) = Σ recvCounts.
func CheckAllToAllV(g Group, out, in Buffer, sendCounts, recvCounts []int) error {
	if err := checkPair(g, OpAllToAllV, out, in); err != nil {
		return err
	}
	st, _, err := checkCounts(g, OpAllToAllV, "sendCounts", sendCounts)
	if err != nil {
		return err
	}
	rt, _, err := checkCounts(g, OpAllToAllV, "recvCounts", recvCounts)
	if err != nil {
		return err
	}
	if in.Len() != st {
		return argErr(g, OpAllToAllV, "len(in) = %d but Σ sendCounts = %d", in.Len(), st)
	}
	if out.Len() != rt {
		return argErr(g, OpAllToAllV, "len(out) = %d but Σ recvCounts = %d", out.Len(), rt)
	}
	if sendCounts[g.Rank()] != recvCounts[g.Rank()] {
		return argErr(g, OpAllToAllV, "sendCounts[%d] = %d but recvCounts[%d] = %d: the piece a rank keeps must have one size",
			g.Rank(), sendCounts[g.Rank()], g.Rank(), recvCounts[g.Rank()])
	}
	return nil
}

// CheckP2P validates a Send (op = OpSend) or Recv (OpRecv): the peer is
// another member of the group.
func CheckP2P(g Group, op string, buf Buffer, peer int) error {
	if err := checkBuf(g, op, "buf", buf); err != nil {
		return err
	}
	if peer < 0 || peer >= g.Size() {
		return argErr(g, op, "peer %d is out of range [0, %d); peers are group ranks, not global ranks", peer, g.Size())
	}
	if peer == g.Rank() {
		return argErr(g, op, "peer %d is the caller itself; a rank cannot send to itself (copy the buffer instead)", peer)
	}
	return nil
}

// CheckBatchP2P validates every op of a BatchP2P.
func CheckBatchP2P(g Group, ops []P2POp) error {
	for i, p := range ops {
		var op string
		switch p.Kind {
		case Isend:
			op = OpSend
		case Irecv:
			op = OpRecv
		default:
			return argErr(g, "BatchP2P", "ops[%d].Kind = %v; use comm.Isend or comm.Irecv", i, p.Kind)
		}
		if err := CheckP2P(g, op, p.Buf, p.Peer); err != nil {
			return fmt.Errorf("BatchP2P ops[%d]: %w", i, err)
		}
	}
	return nil
}

// CheckPartition validates NewSubgroups' partition: every entry is a parent
// rank in range, no rank appears twice, no subgroup is empty. It returns the
// index of the subgroup holding the caller, or -1.
func CheckPartition(g Group, name string, partition [][]int) (mine int, err error) {
	if name == "" {
		return -1, argErr(g, OpNewSubgroups, "empty name; name the groups (\"tp\", \"dp\", …) so errors can say which")
	}
	seen := make([]int, g.Size()) // 1 + subgroup index, 0 when unseen
	mine = -1
	for i, sub := range partition {
		if len(sub) == 0 {
			return -1, argErr(g, OpNewSubgroups, "partition[%d] of %q is empty", i, name)
		}
		for _, r := range sub {
			if r < 0 || r >= g.Size() {
				return -1, argErr(g, OpNewSubgroups, "partition[%d] of %q holds rank %d, out of the parent's range [0, %d)", i, name, r, g.Size())
			}
			if seen[r] != 0 {
				return -1, argErr(g, OpNewSubgroups, "rank %d is in both partition[%d] and partition[%d] of %q; a rank may be in one subgroup of a call",
					r, seen[r]-1, i, name)
			}
			seen[r] = i + 1
			if r == g.Rank() {
				mine = i
			}
		}
	}
	return mine, nil
}
