package pp

import "fmt"

// WithoutInterleaving returns rank's schedule of the non-interleaved 1F1B
// pipeline (schedules.py forward_backward_pipelining_without_interleaving)
// for P = pp stages and M = m microbatches. With W = min(P − r − 1, M)
// warmup steps and R = M − W:
//
//	warmup   i < W:  recv_forward, F(i), send_forward
//	                 (then recv_forward of F(W) if R > 0)
//	steady   i < R:  F(W+i), send_forward_recv_backward, B(i),
//	                 send_backward_recv_forward (send_backward when last)
//	cooldown i < W:  recv_backward, B(R+i), send_backward
//
// Forward-only runs the warmup and then send_forward / recv_forward around
// each steady forward. Calls that are no-ops on the first or last stage
// (recv_forward on stage 0, …) are left out. The rank enters no_sync first;
// it leaves it just before the last backward (in the steady loop when
// W = 0, else before the last cooldown step's recv_backward) when
// gradSyncFunc is false or the rank is the first stage; otherwise, after
// the loops, it leaves no_sync and, with gradSyncFunc, calls
// grad_sync_func once (GradSync of chunk 0). Forward-only never leaves
// no_sync, as in the reference. It panics on a rank outside [0, pp) or
// m < 1 (Build checks).
func WithoutInterleaving(pp, rank, m int, forwardOnly, gradSyncFunc bool) *Schedule {
	if pp < 1 || rank < 0 || rank >= pp || m < 1 {
		panic(fmt.Sprintf("pp.WithoutInterleaving: rank %d of %d with %d microbatches", rank, pp, m))
	}
	w := min(pp-rank-1, m)
	r := m - w
	first, last := rank == 0, rank == pp-1
	e := newEmitter(&Schedule{Name: NameOneFOneB, PP: pp, VPP: 1, Microbatches: m, GroupSize: pp, Rank: rank,
		Warmup: w, Remaining: r, AllWarmup: r == 0, ForwardOnly: forwardOnly})

	recvForward := func(i int) { e.comm("recv_forward", false, op(!first, RecvPrev, i, 0)) }
	sendForward := func(i int) { e.comm("send_forward", false, op(!last, SendNext, i, 0)) }
	recvBackward := func(i int) { e.comm("recv_backward", false, op(!last, RecvNext, i, 0)) }
	sendBackward := func(i int) { e.comm("send_backward", false, op(!first, SendPrev, i, 0)) }
	// The grad-sync re-enable before the last backward: other stages
	// reduce in the pipeline bubble through grad_sync_func instead.
	enableBeforeLastBackward := func() {
		if !gradSyncFunc || first {
			e.enableGradSync()
		}
	}

	e.disableGradSync()
	for i := 0; i < w; i++ {
		recvForward(i)
		e.forward(i, 0)
		sendForward(i)
	}
	if r > 0 {
		recvForward(w)
	}
	for i := 0; i < r; i++ {
		lastIter := i == r-1
		e.forward(w+i, 0)
		if forwardOnly {
			sendForward(w + i)
			if !lastIter {
				recvForward(w + i + 1)
			}
			continue
		}
		// The forward just run is sent; the gradient of the oldest
		// outstanding microbatch, i, comes back.
		e.comm("send_forward_recv_backward", false, op(!last, SendNext, w+i, 0), op(!last, RecvNext, i, 0))
		if w == 0 && lastIter {
			enableBeforeLastBackward()
		}
		e.backward(i, 0)
		if lastIter {
			sendBackward(i)
		} else {
			e.comm("send_backward_recv_forward", false, op(!first, SendPrev, i, 0), op(!first, RecvPrev, w+i+1, 0))
		}
	}
	if !forwardOnly {
		for i := 0; i < w; i++ {
			if i == w-1 {
				enableBeforeLastBackward()
			}
			recvBackward(r + i)
			e.backward(r+i, 0)
			sendBackward(r + i)
		}
		if e.noSync {
			e.enableGradSync()
			if gradSyncFunc {
				e.gradSync(0)
			}
		}
	}
	return e.done()
}
