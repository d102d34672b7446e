package train

import (
	"os"
	"runtime"
	"strings"
	"sync/atomic"
)

// collector runs one garbage collection per iteration of the process, at the
// start of whichever of its ranks reaches the iteration first.
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
// With GOGC=off in the environment the user has turned the collector off, and
// the collector does nothing.
type collector struct {
	next atomic.Int64 // the last iteration collected, plus one
	gc   func()
	off  bool
}

// stepCollector is the process's collector: in-process ranks share it.
var stepCollector = newCollector(runtime.GC, os.Getenv("GOGC"))

// newCollector returns a collector calling gc, off when gogc (the
// environment's GOGC) is "off".
func newCollector(gc func(), gogc string) *collector {
	return &collector{gc: gc, off: strings.EqualFold(strings.TrimSpace(gogc), "off")}
}

// atStep collects once for iteration it: the first rank to call it for it
// collects, the others (and a second call) return at once. Ranks stay within
// an iteration of each other, as every step ends in collectives.
func (c *collector) atStep(it int) {
	if c.off || c.next.Swap(int64(it)+1) == int64(it)+1 {
		return
	}
	c.gc()
}
