package train

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestCollectorOncePerIteration: ranks of one process reaching the same
// iteration collect once between them, and each new iteration collects again.
func TestCollectorOncePerIteration(t *testing.T) {
	var n atomic.Int64
	c := newCollector(func() { n.Add(1) }, "")
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
}

// TestCollectorOffWithGOGCOff: a user who turned Go's collector off gets no
// collections from the trainer.
func TestCollectorOffWithGOGCOff(t *testing.T) {
	for _, gogc := range []string{"off", "OFF", " off "} {
		calls := 0
		c := newCollector(func() { calls++ }, gogc)
		c.atStep(0)
		c.atStep(1)
		if calls != 0 {
			t.Errorf("GOGC=%q: %d collections, want none", gogc, calls)
		}
	}
	calls := 0
	newCollector(func() { calls++ }, "100").atStep(0)
	if calls != 1 {
		t.Errorf("GOGC=100: %d collections, want 1", calls)
	}
}
