//go:build mpi

package mpi

import (
	"context"

	"github.com/gotron/gotron/comm"
)

// Reductions. MPI's own reductions (MPI_Iallreduce, MPI_Ireduce_scatter)
// pick their algorithm, and with it the order in which they add the
// members' values, from the message size and process count: the result is
// deterministic for a fixed size and count but is not comm's contract
// (members folded in rank order, 16-bit types accumulated in float32 and
// rounded once), so it would differ bitwise from comm/local, and MPI has no
// bfloat16 or float16 types to reduce at all. gotron therefore lets MPI
// move data only and reduces with comm.Reduce, the kernel every backend
// shares:
//
//	ReduceScatter  MPI_Ialltoallv sends chunk k of every member's input to
//	               member k; member k folds the n pieces in rank order.
//	AllReduce      the same on n near-equal chunks of the buffer, then an
//	               in-place MPI_Iallgatherv of the reduced chunks.
//
// Each member sends and receives (n−1)/n of the buffer per phase, as a
// ring or Rabenseifner all-reduce does, and bf16/fp16 travel as 16-bit
// words (half the bytes of a float32 conversion). The results are bitwise
// those of comm/local for any process count.

// countLimitMsg is the fix for a length MPI cannot carry.
const countLimitMsg = "%s holds %d elements, more than MPI's count limit of 2³¹−1; split the operation into pieces"

// evenSplit cuts l elements into n chunks, the first l mod n one longer,
// and returns their counts and offsets.
func evenSplit(l, n int) (counts, displs []int) {
	counts = make([]int, n)
	for k := range counts {
		counts[k] = l / n
		if k < l%n {
			counts[k]++
		}
	}
	return counts, offsets(counts)
}

// offsets returns the exclusive prefix sums of counts.
func offsets(counts []int) []int {
	displs := make([]int, len(counts))
	off := 0
	for k, c := range counts {
		displs[k] = off
		off += c
	}
	return displs
}

// reduceScatterBody moves chunk k (counts[k] elements at displs[k]) of every
// member's in to member k with MPI_Ialltoallv on d1, and reduces this
// member's chunk into out in rank order.
func (c *call) reduceScatterBody(out, in comm.Buffer, counts, displs []int, op comm.ReduceOp) error {
	g := c.g
	n, me := len(g.global), g.rank
	cm := counts[me]
	dt := in.DType()
	scratch := c.mem.buffer(dt, n*cm)
	sc, rc, rd := make([]int, n), make([]int, n), make([]int, n)
	for k := range n {
		if k != me {
			sc[k], rc[k] = counts[k], cm
		}
		rd[k] = k * cm
	}
	inPtr := pin(&c.pin, in)
	err := c.phase(&c.t1, "MPI_Ialltoallv", func(q *request) error {
		m := &c.mem
		return ialltoallv(inPtr, cInts(m, sc), cInts(m, displs), addr(scratch), cInts(m, rc), cInts(m, rd), mpiType(dt), g.d1, q)
	})
	if err != nil {
		return err
	}
	ins := make([]comm.Buffer, n)
	for k := range n {
		if k == me {
			ins[k] = in.Slice(displs[me], displs[me]+cm)
		} else {
			ins[k] = scratch.Slice(k*cm, (k+1)*cm)
		}
	}
	comm.Reduce(op, []comm.Buffer{out}, ins)
	return nil
}

func (g *group) allReduce(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) (*call, error) {
	if err := comm.CheckAllReduce(g, buf, op); err != nil {
		return nil, err
	}
	if !fitsInt(buf.Len()) {
		return nil, g.argErr(comm.OpAllReduce, countLimitMsg, "buf", buf.Len())
	}
	h := header{hKind: int64(kAllReduce), hDType: int64(buf.DType()), hLenA: int64(buf.Len()), hROp: int64(op)}
	c, err := g.issue(ctx, h, detail{}, true, true)
	if err != nil {
		return nil, err
	}
	c.body = func(c *call) error {
		counts, displs := evenSplit(buf.Len(), len(g.global))
		mine := buf.Slice(displs[g.rank], displs[g.rank]+counts[g.rank])
		if err := c.reduceScatterBody(mine, buf, counts, displs, op); err != nil {
			return err
		}
		ptr := pin(&c.pin, buf)
		return c.phase(&c.t2, "MPI_Iallgatherv", func(q *request) error {
			return iallgatherv(nil, 0, ptr, cInts(&c.mem, counts), cInts(&c.mem, displs), mpiType(buf.DType()), g.d2, q)
		})
	}
	return c, nil
}

// nativeAllReduce is MPI_Iallreduce(MPI_SUM) on a float32 buffer: MPI's own
// algorithm and summation order. Benchmarks compare it with AllReduce.
func (g *group) nativeAllReduce(ctx context.Context, buf []float32) error {
	b := comm.F32(buf)
	h := header{hKind: int64(kNativeAllReduce), hDType: int64(comm.Float32), hLenA: int64(len(buf)), hROp: int64(comm.Sum)}
	c, err := g.issue(ctx, h, detail{}, true, false)
	if err != nil {
		return err
	}
	c.body = func(c *call) error {
		ptr := pin(&c.pin, b)
		return c.phase(&c.t1, "MPI_Iallreduce", func(q *request) error {
			return iallreduceSum(ptr, len(buf), tF32, g.d1, q)
		})
	}
	return c.runBlocking()
}

func (g *group) reduceScatter(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (*call, error) {
	if err := comm.CheckReduceScatter(g, out, in, op); err != nil {
		return nil, err
	}
	if !fitsInt(in.Len()) {
		return nil, g.argErr(comm.OpReduceScatter, countLimitMsg, "in", in.Len())
	}
	h := header{hKind: int64(kReduceScatter), hDType: int64(in.DType()), hLenA: int64(out.Len()), hLenB: int64(in.Len()), hROp: int64(op)}
	c, err := g.issue(ctx, h, detail{}, true, false)
	if err != nil {
		return nil, err
	}
	c.body = func(c *call) error {
		n := len(g.global)
		counts := make([]int, n)
		for k := range counts {
			counts[k] = out.Len()
		}
		return c.reduceScatterBody(out, in, counts, offsets(counts), op)
	}
	return c, nil
}

func (g *group) ReduceScatterV(ctx context.Context, out, in comm.Buffer, counts []int, op comm.ReduceOp) error {
	if err := comm.CheckReduceScatterV(g, out, in, counts, op); err != nil {
		return err
	}
	if !fitsInt(in.Len()) {
		return g.argErr(comm.OpReduceScatterV, countLimitMsg, "in", in.Len())
	}
	counts = append([]int(nil), counts...)
	h := header{hKind: int64(kReduceScatterV), hDType: int64(in.DType()), hLenA: int64(out.Len()), hLenB: int64(in.Len()),
		hROp: int64(op), hHash1: int64(hashInts(counts))}
	c, err := g.issue(ctx, h, detail{Counts: counts}, true, false)
	if err != nil {
		return err
	}
	c.body = func(c *call) error { return c.reduceScatterBody(out, in, counts, offsets(counts), op) }
	return c.runBlocking()
}

func (g *group) allGather(ctx context.Context, out, in comm.Buffer) (*call, error) {
	if err := comm.CheckAllGather(g, out, in); err != nil {
		return nil, err
	}
	if !fitsInt(out.Len()) {
		return nil, g.argErr(comm.OpAllGather, countLimitMsg, "out", out.Len())
	}
	h := header{hKind: int64(kAllGather), hDType: int64(in.DType()), hLenA: int64(out.Len()), hLenB: int64(in.Len())}
	c, err := g.issue(ctx, h, detail{}, true, false)
	if err != nil {
		return nil, err
	}
	c.body = func(c *call) error {
		inPtr, outPtr := pin(&c.pin, in), pin(&c.pin, out)
		return c.phase(&c.t1, "MPI_Iallgather", func(q *request) error {
			if in.Len() == 0 {
				return iallgather(nil, 0, outPtr, 0, mpiType(in.DType()), g.d1, q)
			}
			return iallgather(inPtr, in.Len(), outPtr, in.Len(), mpiType(in.DType()), g.d1, q)
		})
	}
	return c, nil
}

func (g *group) AllGatherV(ctx context.Context, out, in comm.Buffer, counts []int) error {
	if err := comm.CheckAllGatherV(g, out, in, counts); err != nil {
		return err
	}
	if !fitsInt(out.Len()) {
		return g.argErr(comm.OpAllGatherV, countLimitMsg, "out", out.Len())
	}
	counts = append([]int(nil), counts...)
	h := header{hKind: int64(kAllGatherV), hDType: int64(in.DType()), hLenA: int64(out.Len()), hLenB: int64(in.Len()),
		hHash1: int64(hashInts(counts))}
	c, err := g.issue(ctx, h, detail{Counts: counts}, true, false)
	if err != nil {
		return err
	}
	c.body = func(c *call) error {
		inPtr, outPtr := pin(&c.pin, in), pin(&c.pin, out)
		// An empty in would read as MPI_IN_PLACE, which is then the same
		// thing: this member contributes nothing.
		return c.phase(&c.t1, "MPI_Iallgatherv", func(q *request) error {
			return iallgatherv(inPtr, in.Len(), outPtr, cInts(&c.mem, counts), cInts(&c.mem, offsets(counts)), mpiType(in.DType()), g.d1, q)
		})
	}
	return c.runBlocking()
}

func (g *group) broadcast(ctx context.Context, buf comm.Buffer, root int) (*call, error) {
	if err := comm.CheckBroadcast(g, buf, root); err != nil {
		return nil, err
	}
	if !fitsInt(buf.Len()) {
		return nil, g.argErr(comm.OpBroadcast, countLimitMsg, "buf", buf.Len())
	}
	h := header{hKind: int64(kBroadcast), hDType: int64(buf.DType()), hLenA: int64(buf.Len()), hRoot: int64(root)}
	c, err := g.issue(ctx, h, detail{}, true, false)
	if err != nil {
		return nil, err
	}
	c.body = func(c *call) error {
		ptr := pin(&c.pin, buf)
		return c.phase(&c.t1, "MPI_Ibcast", func(q *request) error {
			return ibcast(ptr, buf.Len(), mpiType(buf.DType()), root, g.d1, q)
		})
	}
	return c, nil
}

func (g *group) AllToAll(ctx context.Context, out, in comm.Buffer) error {
	if err := comm.CheckAllToAll(g, out, in); err != nil {
		return err
	}
	if !fitsInt(in.Len()) {
		return g.argErr(comm.OpAllToAll, countLimitMsg, "in", in.Len())
	}
	h := header{hKind: int64(kAllToAll), hDType: int64(in.DType()), hLenA: int64(in.Len())}
	c, err := g.issue(ctx, h, detail{}, true, false)
	if err != nil {
		return err
	}
	c.body = func(c *call) error {
		inPtr, outPtr := pin(&c.pin, in), pin(&c.pin, out)
		chunk := in.Len() / len(g.global)
		return c.phase(&c.t1, "MPI_Ialltoall", func(q *request) error {
			return ialltoall(inPtr, chunk, outPtr, chunk, mpiType(in.DType()), g.d1, q)
		})
	}
	return c.runBlocking()
}

func (g *group) AllToAllV(ctx context.Context, out, in comm.Buffer, sendCounts, recvCounts []int) error {
	if err := comm.CheckAllToAllV(g, out, in, sendCounts, recvCounts); err != nil {
		return err
	}
	if !fitsInt(in.Len(), out.Len()) {
		return g.argErr(comm.OpAllToAllV, countLimitMsg, "in or out", max(in.Len(), out.Len()))
	}
	send, recv := append([]int(nil), sendCounts...), append([]int(nil), recvCounts...)
	hs, hr := splitHashes(g.rank, send, recv)
	h := header{hKind: int64(kAllToAllV), hDType: int64(in.DType()), hLenA: int64(out.Len()), hLenB: int64(in.Len()),
		hHash1: int64(hs), hHash2: int64(hr)}
	c, err := g.issue(ctx, h, detail{Send: send, Recv: recv}, true, false)
	if err != nil {
		return err
	}
	c.body = func(c *call) error {
		inPtr, outPtr := pin(&c.pin, in), pin(&c.pin, out)
		m := &c.mem
		return c.phase(&c.t1, "MPI_Ialltoallv", func(q *request) error {
			return ialltoallv(inPtr, cInts(m, send), cInts(m, offsets(send)), outPtr, cInts(m, recv), cInts(m, offsets(recv)),
				mpiType(in.DType()), g.d1, q)
		})
	}
	return c.runBlocking()
}

// Barrier is the header exchange alone: it completes once every member
// has issued it.
func (g *group) Barrier(ctx context.Context) error {
	c, err := g.issue(ctx, header{hKind: int64(kBarrier)}, detail{}, false, false)
	if err != nil {
		return err
	}
	return c.runBlocking()
}

func (g *group) AllReduce(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) error {
	return runNow(g.allReduce(ctx, buf, op))
}

func (g *group) ReduceScatter(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) error {
	return runNow(g.reduceScatter(ctx, out, in, op))
}

func (g *group) AllGather(ctx context.Context, out, in comm.Buffer) error {
	return runNow(g.allGather(ctx, out, in))
}

func (g *group) Broadcast(ctx context.Context, buf comm.Buffer, root int) error {
	return runNow(g.broadcast(ctx, buf, root))
}

func (g *group) AllReduceAsync(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	return g.runLater(g.allReduce(ctx, buf, op))
}

func (g *group) ReduceScatterAsync(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	return g.runLater(g.reduceScatter(ctx, out, in, op))
}

func (g *group) AllGatherAsync(ctx context.Context, out, in comm.Buffer) (comm.Work, error) {
	return g.runLater(g.allGather(ctx, out, in))
}

func (g *group) BroadcastAsync(ctx context.Context, buf comm.Buffer, root int) (comm.Work, error) {
	return g.runLater(g.broadcast(ctx, buf, root))
}

// runNow runs an issued call in the caller's goroutine.
func runNow(c *call, err error) error {
	if err != nil {
		return err
	}
	return c.runBlocking()
}

// runLater returns the Work of an issued call (work.go).
func (g *group) runLater(c *call, err error) (comm.Work, error) {
	if err != nil {
		return nil, err
	}
	return g.w.startWork(c, []*call{c}), nil
}
