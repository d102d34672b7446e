package cp

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/comm"
)

// ringForward runs attend on every ring member's K and V: its own first,
// then the member before it, and so on (step i holds member rank−i's),
// each block passed on to the next rank while it is computed (Liu et al.
// 2023, arXiv 2310.01889). wait accumulates the time blocked on receives.
func (p *plan) ringForward(ctx context.Context, wait *atomic.Int64, kv []float32, attend func(src int, kv []float32)) error {
	g := p.ring
	n, me := g.Size(), g.Rank()
	next, prev := (me+1)%n, (me-1+n)%n
	spare := [2][]float32{make([]float32, len(kv)), make([]float32, len(kv))}
	cur := kv
	for i := range n {
		var recv, send comm.Work
		var nxt []float32
		if i < n-1 {
			nxt = spare[i%2]
			var err error
			if recv, err = g.RecvAsync(ctx, comm.F32(nxt), prev); err != nil {
				return p.ringErr("receive of K, V", err)
			}
			if send, err = g.SendAsync(ctx, comm.F32(cur), next); err != nil {
				return p.ringErr("send of K, V", err)
			}
		}
		attend((me-i+n)%n, cur)
		if i < n-1 {
			t0 := time.Now()
			if err := recv.Wait(ctx); err != nil {
				return p.ringErr("receive of K, V", err)
			}
			since(wait, t0)
			if err := send.Wait(ctx); err != nil {
				return p.ringErr("send of K, V", err)
			}
			cur = nxt
		}
	}
	return nil
}

// ringBackward runs grads on every member's K and V, passing them the
// other way round the ring (step i holds member rank+i's), and with them
// the gradient of that member's K and V accumulated by the ranks before:
// each rank adds its blocks' gradients and passes the sum on, so that after
// the last step every member's dK, dV arrives home. It returns this rank's.
//
// On each link (rank+1 → rank) messages go in the order K,V of step 0,
// dK,V of step 0, K,V of step 1, dK,V of step 1, …, and are received in
// that order.
func (p *plan) ringBackward(ctx context.Context, wait *atomic.Int64, kv []float32, grads func(src int, kv, dkv []float32)) ([]float32, error) {
	g := p.ring
	n, me := g.Size(), g.Rank()
	next, prev := (me+1)%n, (me-1+n)%n
	spare := [2][]float32{make([]float32, len(kv)), make([]float32, len(kv))}
	acc := [2][]float32{make([]float32, len(kv)), make([]float32, len(kv))}
	in := make([]float32, len(kv))
	cur := kv
	var accSends [2]comm.Work
	for i := range n {
		var err error
		var accRecv, kvRecv, kvSend comm.Work
		if i > 0 {
			if accRecv, err = g.RecvAsync(ctx, comm.F32(in), next); err != nil {
				return nil, p.ringErr("receive of dK, dV", err)
			}
		}
		var nxt []float32
		if i < n-1 {
			nxt = spare[i%2]
			if kvRecv, err = g.RecvAsync(ctx, comm.F32(nxt), next); err != nil {
				return nil, p.ringErr("receive of K, V", err)
			}
			if kvSend, err = g.SendAsync(ctx, comm.F32(cur), prev); err != nil {
				return nil, p.ringErr("send of K, V", err)
			}
		}
		mine := acc[i%2]
		if w := accSends[i%2]; w != nil { // the send of two steps ago must be done
			if err := w.Wait(ctx); err != nil {
				return nil, p.ringErr("send of dK, dV", err)
			}
		}
		clear(mine)
		grads((me+i)%n, cur, mine)
		if i > 0 {
			t0 := time.Now()
			if err := accRecv.Wait(ctx); err != nil {
				return nil, p.ringErr("receive of dK, dV", err)
			}
			since(wait, t0)
			for j, v := range in {
				mine[j] += v
			}
		}
		if accSends[i%2], err = g.SendAsync(ctx, comm.F32(mine), prev); err != nil {
			return nil, p.ringErr("send of dK, dV", err)
		}
		if i < n-1 {
			t0 := time.Now()
			if err := kvRecv.Wait(ctx); err != nil {
				return nil, p.ringErr("receive of K, V", err)
			}
			since(wait, t0)
			if err := kvSend.Wait(ctx); err != nil {
				return nil, p.ringErr("send of K, V", err)
			}
			cur = nxt
		}
	}
	dkv := make([]float32, len(kv))
	t0 := time.Now()
	if err := g.Recv(ctx, comm.F32(dkv), next); err != nil {
		return nil, p.ringErr("receive of dK, dV", err)
	}
	since(wait, t0)
	for _, w := range accSends {
		if w != nil {
			if err := w.Wait(ctx); err != nil {
				return nil, p.ringErr("send of dK, dV", err)
			}
		}
	}
	return dkv, nil
}

// ringErr names the ring and what failed.
func (p *plan) ringErr(what string, err error) error {
	return fmt.Errorf("cp: ring attention %s over %s: %w", what, p.ring.Name(), err)
}
