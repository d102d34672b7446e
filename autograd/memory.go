package autograd

import "github.com/gotron/gotron/tensor"

// activationMemory counts the bytes a tape keeps for backward: the
// storage of tensors saved by recorded Functions (each storage once, however
// many nodes save it or views of it; parameters' values excluded) and the
// sizes of their States. It is the activation memory of Korthikanti et al.
// 2022 (arXiv 2205.05198): what the forward pass holds until backward.
type activationMemory struct {
	live, peak int64
	refs       map[uintptr]int
	released   map[uintptr]bool // counted storages released by Tape.Release
	holds      map[uintptr]int  // references taken by Tape.Hold
}

// StateSizer is implemented by a Function's State that is not one of the
// common slice types, to report the bytes it holds for backward.
type StateSizer interface {
	StateBytes() int64
}

// ActivationBytes returns the bytes currently held for backward by
// recorded operations on the tape. A graph dropped without Backward stays
// counted (the tape cannot see it go); the trainer always runs backward or
// stops.
func (t *Tape) ActivationBytes() int64 { return t.mem.live }

// PeakActivationBytes returns the largest ActivationBytes since the tape
// was made or ResetPeakActivationBytes was last called.
func (t *Tape) PeakActivationBytes() int64 { return t.mem.peak }

// ResetPeakActivationBytes restarts peak tracking from the current live
// bytes.
func (t *Tape) ResetPeakActivationBytes() { t.mem.peak = t.mem.live }

// savedBytes is one saved storage a node accounted.
type savedBytes struct {
	id    uintptr
	bytes int64
}

// account adds a recorded node's saved tensors and State to the live
// bytes. The storage of the node's parameter inputs (Var.MarkParameter) is
// not an activation and is not counted.
func (m *activationMemory) account(c *Ctx, inputs []*Var) {
	var n int64
	for _, s := range c.saved {
		id, b := s.Storage()
		if id == 0 || isParamStorage(id, inputs) {
			continue
		}
		if m.refs == nil {
			m.refs = map[uintptr]int{}
		}
		if m.refs[id] == 0 {
			n += b
		}
		m.refs[id]++
		c.counted = append(c.counted, savedBytes{id, b})
	}
	c.stateBytes = stateBytes(c.State)
	n += c.stateBytes
	m.live += n
	m.peak = max(m.peak, m.live)
}

// forget removes a node's saved tensors and State from the live bytes.
func (m *activationMemory) forget(c *Ctx) {
	for _, s := range c.counted {
		if m.refs[s.id]--; m.refs[s.id] == 0 {
			delete(m.refs, s.id)
			if m.released[s.id] {
				delete(m.released, s.id)
			} else {
				m.live -= s.bytes
			}
		}
	}
	c.counted = nil
	m.live -= c.stateBytes
}

// Release frees x's storage (tensor.Tensor.Release) and, when recorded
// operations hold it for backward, takes its bytes off the live count
// until Restore: activation recompute drops an output that backward will
// compute again (tp.CheckpointWithoutOutput).
func (t *Tape) Release(x *tensor.Tensor) {
	id, b := x.Storage()
	m := &t.mem
	if id != 0 && m.refs[id] > 0 && !m.released[id] {
		if m.released == nil {
			m.released = map[uintptr]bool{}
		}
		m.released[id] = true
		m.live -= b
	}
	x.Release()
}

// Restore gives x's released storage back (zero-filled, tensor.Tensor.Restore)
// and, when recorded operations hold it, counts its bytes again.
func (t *Tape) Restore(x *tensor.Tensor) {
	id, b := x.Storage()
	m := &t.mem
	if m.released[id] {
		delete(m.released, id)
		m.live += b
		m.peak = max(m.peak, m.live)
	}
	x.Restore()
}

func isParamStorage(id uintptr, inputs []*Var) bool {
	for _, in := range inputs {
		if in.param && in.Value != nil {
			if pid, _ := in.Value.Storage(); pid == id {
				return true
			}
		}
	}
	return false
}

// stateBytes is the size of the common State types. Shapes ([]int) are
// metadata, not activations, and count nothing.
func stateBytes(s any) int64 {
	switch v := s.(type) {
	case nil:
		return 0
	case StateSizer:
		return v.StateBytes()
	case []byte:
		return int64(cap(v))
	case []float32:
		return 4 * int64(cap(v))
	case []int32:
		return 4 * int64(cap(v))
	case []uint16:
		return 2 * int64(cap(v))
	case *tensor.Tensor:
		_, b := v.Storage()
		return b
	}
	return 0
}

// Hold counts x's storage as held for backward by the caller, as if a
// recorded operation had saved it, until Unhold: a pipeline schedule keeps
// each stage's output until that microbatch's backward, and the memory it
// holds is activation memory like any other. Hold and Unhold pair up.
func (t *Tape) Hold(x *tensor.Tensor) {
	id, b := x.Storage()
	if id == 0 {
		return
	}
	m := &t.mem
	if m.refs == nil {
		m.refs, m.holds = map[uintptr]int{}, map[uintptr]int{}
	}
	if m.holds == nil {
		m.holds = map[uintptr]int{}
	}
	if m.refs[id] == 0 {
		m.live += b
		m.peak = max(m.peak, m.live)
	}
	m.refs[id]++
	m.holds[id]++
}

// Unhold drops a reference Hold took on x's storage.
func (t *Tape) Unhold(x *tensor.Tensor) {
	id, b := x.Storage()
	m := &t.mem
	if id == 0 || m.holds[id] == 0 {
		return
	}
	if m.holds[id]--; m.holds[id] == 0 {
		delete(m.holds, id)
	}
	if m.refs[id]--; m.refs[id] == 0 {
		delete(m.refs, id)
		if m.released[id] {
			delete(m.released, id)
		} else {
			m.live -= b
		}
	}
}

// Saved reports whether a recorded operation (not a Hold) keeps x's
// storage for backward: releasing it then would break that backward.
func (t *Tape) Saved(x *tensor.Tensor) bool {
	id, _ := x.Storage()
	return id != 0 && t.mem.refs[id]-t.mem.holds[id] > 0
}
