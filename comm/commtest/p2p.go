package commtest

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
)

func p2pCases() []Case {
	return []Case{
		{Name: "SendRecv", MinSize: 2, Rank: sendRecv},
		{Name: "SendRecvAsync", MinSize: 2, Rank: sendRecvAsync},
		{Name: "BatchP2P", MinSize: 2, Rank: batchP2P},
		{Name: "BatchP2PNoOrderBetweenPeers", MinSize: 3, Rank: batchP2PUnordered},
	}
}

// message is the content of the i-th message of a test from global rank src
// to global rank dst: its dtype and length vary with i.
func message(seed uint64, src, dst, i int) comm.Buffer {
	dt := dtypes[i%len(dtypes)]
	n := []int{0, 1, 17, 1000, 3}[i%5]
	return gen(dt, seed+uint64(1000*dst+i), src, n)
}

func recvInto(seed uint64, src, dst, i int) comm.Buffer {
	m := message(seed, src, dst, i)
	return zeros(m.DType(), m.Len())
}

// sendRecv pairs ranks 0–1, 2–3, …; in each pair the lower rank sends a
// run of messages that the higher receives in order, then the other way.
func sendRecv(ctx context.Context, g comm.Group) error {
	const seed, count = 10, 7
	r := g.Rank()
	peer := r ^ 1
	if peer >= g.Size() {
		return nil // the odd one out of an odd world
	}
	me, them := g.GlobalRanks()[r], g.GlobalRanks()[peer]
	for phase := range 2 {
		sending := (r < peer) == (phase == 0)
		for i := range count {
			if sending {
				if err := g.Send(ctx, message(seed, me, them, i), peer); err != nil {
					return err
				}
				continue
			}
			buf := recvInto(seed, them, me, i)
			if err := g.Recv(ctx, buf, peer); err != nil {
				return err
			}
			if err := same(fmt.Sprintf("Recv #%d from %d", i, peer), buf, message(seed, them, me, i)); err != nil {
				return failf(g, "%v", err)
			}
		}
	}
	return nil
}

// sendRecvAsync sends a run of messages around the ring with the async
// forms, all posted before any is waited for, then waits in reverse order.
func sendRecvAsync(ctx context.Context, g comm.Group) error {
	const seed, count = 20, 6
	n, r := g.Size(), g.Rank()
	next, prev := (r+1)%n, (r+n-1)%n
	me, gn, gp := g.GlobalRanks()[r], g.GlobalRanks()[next], g.GlobalRanks()[prev]
	var works []comm.Work
	bufs := make([]comm.Buffer, count)
	for i := range count {
		bufs[i] = recvInto(seed, gp, me, i)
		wr, err := g.RecvAsync(ctx, bufs[i], prev)
		if err != nil {
			return err
		}
		ws, err := g.SendAsync(ctx, message(seed, me, gn, i), next)
		if err != nil {
			return err
		}
		works = append(works, wr, ws)
	}
	for i := len(works) - 1; i >= 0; i-- {
		if err := works[i].Wait(ctx); err != nil {
			return err
		}
	}
	for i := range count {
		if err := same(fmt.Sprintf("RecvAsync #%d from %d", i, prev), bufs[i], message(seed, gp, me, i)); err != nil {
			return failf(g, "%v", err)
		}
	}
	return nil
}

// batchP2P exchanges two messages with every other rank in one batch, sends
// listed before receives, as Megatron's P2P communicator batches them.
func batchP2P(ctx context.Context, g comm.Group) error {
	const seed = 30
	n, r := g.Size(), g.Rank()
	global := g.GlobalRanks()
	var ops []comm.P2POp
	recvd := map[[2]int]comm.Buffer{}
	for round := range 2 {
		for d := 1; d < n; d++ {
			k := (r + d) % n
			ops = append(ops, comm.P2POp{Kind: comm.Isend, Buf: message(seed, global[r], global[k], round), Peer: k})
		}
		for d := 1; d < n; d++ {
			k := (r + n - d) % n
			b := recvInto(seed, global[k], global[r], round)
			recvd[[2]int{k, round}] = b
			ops = append(ops, comm.P2POp{Kind: comm.Irecv, Buf: b, Peer: k})
		}
	}
	w, err := g.BatchP2P(ctx, ops)
	if err != nil {
		return err
	}
	if err := w.Wait(ctx); err != nil {
		return err
	}
	if err := w.Wait(ctx); err != nil {
		return failf(g, "a second Wait returned %v", err)
	}
	for key, b := range recvd {
		k, round := key[0], key[1]
		if err := same(fmt.Sprintf("BatchP2P message %d from %d", round, k), b, message(seed, global[k], global[r], round)); err != nil {
			return failf(g, "%v", err)
		}
	}
	empty, err := g.BatchP2P(ctx, nil)
	if err != nil {
		return err
	}
	return empty.Wait(ctx)
}

// batchP2PUnordered checks that a batch's ops with different peers do not
// wait for each other (the pipeline schedules rely on it): rank 1 posts
// [send→0, recv←2] while rank 0 only posts its receive from 1 after a
// message from 2 that 2 sends in a batch of its own once its send to 1 has
// completed. If rank 1's receive from 2 waited for rank 0 to take rank 1's
// send, the three would wait in a circle. Ranks 3 and up take no part.
func batchP2PUnordered(ctx context.Context, g comm.Group) error {
	const seed = 31
	global := g.GlobalRanks()
	msg := func(src, dst int) comm.Buffer { return message(seed, global[src], global[dst], 3) }
	recv := func(src int) comm.Buffer { return recvInto(seed, global[src], global[g.Rank()], 3) }
	batch := func(ops ...comm.P2POp) error {
		w, err := g.BatchP2P(ctx, ops)
		if err != nil {
			return err
		}
		return w.Wait(ctx)
	}
	check := func(b comm.Buffer, src int) error {
		if err := same(fmt.Sprintf("message from %d", src), b, msg(src, g.Rank())); err != nil {
			return failf(g, "%v", err)
		}
		return nil
	}
	switch g.Rank() {
	case 0:
		from2, from1 := recv(2), recv(1)
		if err := batch(comm.P2POp{Kind: comm.Irecv, Buf: from2, Peer: 2}); err != nil {
			return err
		}
		if err := batch(comm.P2POp{Kind: comm.Irecv, Buf: from1, Peer: 1}); err != nil {
			return err
		}
		if err := check(from2, 2); err != nil {
			return err
		}
		return check(from1, 1)
	case 1:
		from2 := recv(2)
		if err := batch(comm.P2POp{Kind: comm.Isend, Buf: msg(1, 0), Peer: 0}, comm.P2POp{Kind: comm.Irecv, Buf: from2, Peer: 2}); err != nil {
			return err
		}
		return check(from2, 2)
	case 2:
		if err := batch(comm.P2POp{Kind: comm.Isend, Buf: msg(2, 1), Peer: 1}); err != nil {
			return err
		}
		return batch(comm.P2POp{Kind: comm.Isend, Buf: msg(2, 0), Peer: 0})
	}
	return nil
}
