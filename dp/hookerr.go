package dp

import "sync"

// hookErr keeps the first error a grad hook met (a hook cannot return
// one); FinishGradSync returns it. The zero value holds none.
type hookErr struct {
	mu  sync.Mutex
	err error
}

// fail records err if it is the first.
func (h *hookErr) fail(err error) {
	if err == nil {
		return
	}
	h.mu.Lock()
	if h.err == nil {
		h.err = err
	}
	h.mu.Unlock()
}

// first returns the first error recorded since the last reset.
func (h *hookErr) first() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// reset forgets it, for the next iteration.
func (h *hookErr) reset() {
	h.mu.Lock()
	h.err = nil
	h.mu.Unlock()
}
