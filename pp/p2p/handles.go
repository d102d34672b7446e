package p2p

import (
	"context"
	"fmt"
	"sync"

	"github.com/gotron/gotron/comm"
)

// Dir is one of the four ops of an exchange, seen from the rank issuing it.
// The constants are in the reference's batch order and print as its handle
// keys, matching pp.Dir.
type Dir uint8

// The four ops.
const (
	SendPrev Dir = iota // the input gradient to the previous stage
	RecvPrev            // the input activation from the previous stage
	SendNext            // the output activation to the next stage
	RecvNext            // the output gradient from the next stage
	numDirs
)

var dirNames = [numDirs]string{"send_prev", "recv_prev", "send_next", "recv_next"}

// String returns the reference's handle key: "send_prev", "recv_prev",
// "send_next" or "recv_next".
func (d Dir) String() string {
	if d < numDirs {
		return dirNames[d]
	}
	return fmt.Sprintf("Dir(%d)", uint8(d))
}

// IsSend reports whether d sends.
func (d Dir) IsSend() bool { return d == SendPrev || d == SendNext }

// Handle is one op of an exchange that was issued without waiting (the
// reference's request object for one handle key). For a receive, the
// received tensor holds its values only after Wait has returned nil; for a
// send, the sent tensor must not be modified before Wait returns.
type Handle struct {
	c      *Communicator
	call   string
	shapes bool // a message of the shape exchange
	dir    Dir
	batch  []Dir // the ops of the same comm Work (a batch), nil for one op
	work   comm.Work
	finish func() // widens a received 16-bit message into its tensor
	once   sync.Once
}

// Dir returns the op's direction.
func (h *Handle) Dir() Dir { return h.dir }

// Wait blocks until the op has completed and, for a receive, its tensor is
// filled. ctx bounds only this wait: when it ends first, Wait returns an
// error wrapping ctx.Err(), the op goes on, and Wait may be called again. It
// may be called any number of times and from any goroutine. A failed op
// returns an *Error naming the call, the op and its peer.
func (h *Handle) Wait(ctx context.Context) error {
	if err := h.work.Wait(ctx); err != nil {
		return h.c.opError(h.call, h.shapes, h.dir, others(h.batch, h.dir), err)
	}
	if h.finish != nil {
		h.once.Do(h.finish)
	}
	return nil
}

// Handles are the pending ops of one exchange issued without waiting (the
// reference's dict of requests keyed send_next, recv_prev, send_prev and
// recv_next). A nil *Handles has no ops.
type Handles struct {
	ops [numDirs]*Handle
}

// Has reports whether the exchange issued op d.
func (h *Handles) Has(d Dir) bool { return h.Get(d) != nil }

// Get returns the handle of op d, or nil when the exchange did not issue it
// (the schedule keeps a receive's handle to wait for it later, as the
// reference pops it from the dict).
func (h *Handles) Get(d Dir) *Handle {
	if h == nil || d >= numDirs {
		return nil
	}
	return h.ops[d]
}

// Dirs returns the issued ops in the reference's batch order.
func (h *Handles) Dirs() []Dir {
	var ds []Dir
	for d := range numDirs {
		if h.Has(d) {
			ds = append(ds, d)
		}
	}
	return ds
}

// Wait waits for op d (see Handle.Wait). It is an error to wait for an op
// the exchange did not issue; Has says which were.
func (h *Handles) Wait(ctx context.Context, d Dir) error {
	op := h.Get(d)
	if op == nil {
		return fmt.Errorf("p2p: Handles.Wait(%v): the exchange issued no %v op (it issued %v); check Has first", d, d, h.Dirs())
	}
	return op.Wait(ctx)
}

// WaitAll waits for every issued op in the reference's batch order and
// returns the first error.
func (h *Handles) WaitAll(ctx context.Context) error {
	for _, d := range h.Dirs() {
		if err := h.ops[d].Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// merge returns the handles of a and b together (each op is in at most one).
func merge(a, b *Handles) *Handles {
	h := &Handles{}
	for d := range numDirs {
		h.ops[d] = a.Get(d)
		if op := b.Get(d); op != nil {
			h.ops[d] = op
		}
	}
	return h
}

// others returns the ops of batch other than d.
func others(batch []Dir, d Dir) []Dir {
	var ds []Dir
	for _, b := range batch {
		if b != d {
			ds = append(ds, b)
		}
	}
	return ds
}
