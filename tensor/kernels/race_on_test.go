//go:build race

package kernels

// raceEnabled reports whether the race detector is on; its instrumentation changes escape
// analysis, so allocation counts are only checked without it.
const raceEnabled = true
