package train

import (
	"math"
	"runtime/metrics"
	"sync/atomic"
)

// collector runs one garbage collection per iteration of a run's ranks in
// this process, at the start of whichever of them reaches the iteration
// first. Each run (each attempt of an in-process restart) has its own,
// made by Prepare and shared by the ranks it builds.
//
// Go's collector lets the heap grow to twice what was live at the end of its
// last cycle (GOGC=100). Left alone, a training step's cycles fall wherever the
// heap reaches that goal, often in the middle of a backward pass with most
// activations still live, so the next goal lies above the step's own peak and
// the heap takes pages it never had before: on a machine where each first
// touch of a page is a trap into the hypervisor, the medium benchmark's second
// iteration took 2.0–3.3 s against 1.4 s for the later ones. At the start of an
// iteration only the parameters, gradients and optimizer state are live, so a
// cycle there costs about a millisecond (the float32 buffers hold no pointers
// to scan), fixes the next goal at twice that state, and puts every later
// iteration's cycles at the same places: the heap reuses the same pages each
// iteration and peaks lower (docs/BENCHMARKS.md, § The first iteration).
//
// When the collector is off (GOGC=off or negative, or
// debug.SetGCPercent(-1)), the user has turned collection off, and atStep
// does nothing.
type collector struct {
	next atomic.Int64 // the last iteration collected, plus one
	gc   func()
}

// newCollector returns a collector calling gc.
func newCollector(gc func()) *collector { return &collector{gc: gc} }

// atStep collects once for iteration it: the first rank to call it for it
// collects, the others (and a second call) return at once. Ranks stay
// within an iteration of each other, as every step ends in collectives. A
// nil collector does nothing (a trainer built without a run: tests).
func (c *collector) atStep(it int) {
	if c == nil || c.next.Swap(int64(it)+1) == int64(it)+1 || collectionOff() {
		return
	}
	c.gc()
}

// collectionOff reports whether Go's collector is off: the runtime reports
// GOGC as the largest uint64 then.
func collectionOff() bool {
	s := [1]metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s[:])
	return s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() == math.MaxUint64
}
