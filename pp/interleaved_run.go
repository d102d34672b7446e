package pp

import "fmt"

// run emits the interleaved schedule's actions: the warmup forwards, the
// steady one-forward-one-backward steps and the cooldown backwards, with
// the reference's communication calls and waits between them.
func (g *interleavedGen) run() error {
	fo := g.cfg.ForwardOnly
	g.e.disableGradSync()
	if g.cfg.ParamSyncFunc && !fo {
		// The reference syncs chunks 0 and 1 up front (with one chunk it
		// would index past the model list; gotron syncs chunk 0 only).
		for c := 0; c < min(2, g.v); c++ {
			g.e.paramSync(c)
		}
	}
	g.e.comm("recv_forward", false, g.recvPrevOp(!g.first, 0))
	if err := g.warmup(); err != nil {
		return err
	}
	if err := g.steady(); err != nil {
		return err
	}
	if !fo {
		if err := g.cooldown(); err != nil {
			return err
		}
	}
	if len(g.recvPrevWaits) > 0 || len(g.recvNextWaits) > 0 {
		return fmt.Errorf("pp: internal: rank %d ends with handles not waited for: recv_prev %v, recv_next %v",
			g.r, g.recvPrevWaits, g.recvNextWaits)
	}
	return nil
}

func (g *interleavedGen) warmup() error {
	fo := g.cfg.ForwardOnly
	for k := 0; k < g.w; k++ {
		cur := g.chunk(k, true)
		if g.flush && !(cur == 0 && g.first) && k != 0 {
			if err := g.popWait(&g.recvPrevWaits, "recv_prev", k); err != nil {
				return err
			}
		}
		recvPrev, nextC := g.recvFromPrevStage(k, true)
		if k == g.total-1 {
			recvPrev = false
		}
		// With the warmup flush, the other ranks post the receive for
		// step k+1 before running step k.
		if g.flush && !g.first {
			g.prefetch("send_forward_recv_forward", &g.recvPrevWaits, g.recvPrevOp(recvPrev, nextC))
		}
		g.forwardStep(k)
		send := g.sendNextOp(k)
		preRecvGrad := k == g.w-1 && !fo && !g.allWarmup
		switch {
		case !g.flush && preRecvGrad && !g.overlap:
			// The last warmup step also receives the first gradient,
			// for the last chunk.
			g.e.comm("send_forward_backward_recv_forward_backward", false,
				send, g.recvPrevOp(recvPrev, nextC), g.recvNextOp(!g.last, g.v-1))
		case !g.flush:
			g.e.comm("send_forward_recv_forward", false, send, g.recvPrevOp(recvPrev, nextC))
		case !g.first:
			g.asyncForward(send, nil)
		default:
			g.asyncForward(send, g.recvPrevOp(recvPrev, nextC))
		}
		if g.overlap && preRecvGrad {
			g.asyncBackward(nil, g.recvNextOp(!g.last, g.v-1))
		}
	}
	return nil
}

func (g *interleavedGen) steady() error {
	for k := 0; k < g.rem; k++ {
		fk, bk := k+g.w, k
		recvPrev, nextFC := g.recvFromPrevStage(fk, true)
		if k == g.rem-1 {
			// The input of the step after the last was received before
			// the loop began.
			recvPrev = false
		}
		recvNext, nextBC := g.recvFromPrevStage(bk, false)
		if !g.overlap {
			g.forwardStep(fk)
			g.backwardStep(bk)
			g.e.comm("send_forward_backward_recv_forward_backward", false,
				g.sendPrevOp(bk), g.recvPrevOp(recvPrev, nextFC), g.sendNextOp(fk), g.recvNextOp(recvNext, nextBC))
			continue
		}
		// pp_pre_forward, forward, pp_post_forward.
		if !(g.chunk(fk, true) == 0 && g.first) {
			if err := g.popWait(&g.recvPrevWaits, "recv_prev", fk); err != nil {
				return err
			}
		}
		g.forwardStep(fk)
		g.asyncForward(g.sendNextOp(fk), g.recvPrevOp(recvPrev, nextFC))
		// pp_pre_backward, backward, pp_post_backward.
		if !(g.chunk(bk, false) == g.v-1 && g.last) {
			if err := g.popWait(&g.recvNextWaits, "recv_next", bk); err != nil {
				return err
			}
		}
		g.backwardStep(bk)
		g.asyncBackward(g.sendPrevOp(bk), g.recvNextOp(recvNext, nextBC))
	}
	return nil
}

func (g *interleavedGen) cooldown() error {
	if g.allWarmup {
		g.e.comm("recv_backward", false, g.recvNextOp(!g.last, g.v-1))
	}
	for k := g.rem; k < g.total; k++ {
		cur := g.chunk(k, false)
		if !(cur == g.v-1 && g.last) && k != 0 {
			if err := g.popWait(&g.recvNextWaits, "recv_next", k); err != nil {
				return err
			}
		}
		recvNext, nextBC := g.recvFromPrevStage(k, false)
		if k == g.total-1 {
			recvNext = false
		}
		if g.flush && !g.last {
			g.prefetch("send_backward_recv_backward", &g.recvNextWaits, g.recvNextOp(recvNext, nextBC))
		}
		g.backwardStep(k)
		send := g.sendPrevOp(k)
		switch {
		case !g.flush:
			g.e.comm("send_backward_recv_backward", false, send, g.recvNextOp(recvNext, nextBC))
		case !g.last:
			g.asyncBackward(send, nil)
		default:
			g.asyncBackward(send, g.recvNextOp(recvNext, nextBC))
		}
	}
	if g.sendPrevWait != nil {
		g.e.wait(*g.sendPrevWait)
		g.sendPrevWait = nil
	}
	// Launch the grad reductions not launched yet.
	g.e.enableGradSync()
	if g.cfg.GradSyncFunc {
		for c := range g.v {
			if !g.synced[c] {
				g.e.gradSync(c)
				g.synced[c] = true
			}
		}
	}
	return nil
}

// prefetch issues a receive-only async call and queues its handle (the
// warmup flush's receive for the next step).
func (g *interleavedGen) prefetch(call string, q *[]Op, recv *Op) {
	if ops := g.e.comm(call, true, recv); len(ops) > 0 {
		*q = append(*q, ops[0])
	}
}
