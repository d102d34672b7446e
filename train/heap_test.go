package train

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCollectorOncePerIteration: ranks of one run reaching the same
// iteration collect once between them, and each new iteration collects
// again; a new run (an in-process restart's) collects at its first
// iteration, whichever it is.
func TestCollectorOncePerIteration(t *testing.T) {
	var n atomic.Int64
	c := newCollector(func() { n.Add(1) })
	for it := range 3 {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { c.atStep(it) })
		}
		wg.Wait()
		c.atStep(it)
		if got := n.Load(); got != int64(it+1) {
			t.Fatalf("after iteration %d: %d collections, want %d", it, got, it+1)
		}
	}
	restart := newCollector(func() { n.Add(1) })
	restart.atStep(2) // resumed at the iteration the first run failed in
	if got := n.Load(); got != 4 {
		t.Errorf("a restarted run's first iteration: %d collections in all, want 4", got)
	}
	var none *collector
	none.atStep(0) // a trainer without a run: nothing, no panic
}

// TestCollectorOffWithCollectionOff: a user who turned Go's collector off
// gets no collections from the trainer.
func TestCollectorOffWithCollectionOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	calls := 0
	c := newCollector(func() { calls++ })
	c.atStep(0)
	c.atStep(1)
	if calls != 0 {
		t.Errorf("collector off: %d collections, want none", calls)
	}
	debug.SetGCPercent(100)
	c.atStep(2)
	if calls != 1 {
		t.Errorf("collector on again: %d collections, want 1", calls)
	}
}
