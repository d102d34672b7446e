package tensor

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// GemmShape is the shape of C[M×N] = op(A)·op(B), with K the shared
// dimension and TransA, TransB the transposes.
type GemmShape struct {
	M, N, K        int
	TransA, TransB bool
}

// GemmTime is the wall time the calls of GemmParallel (and Gemm,
// GemmVarying) at one shape took while a timer ran: each call's time from
// entry to return, summed, so a call that runs on several threads counts
// once. The attention core's block GEMMs, which call BLAS and oneDNN
// directly, are not among them.
type GemmTime struct {
	GemmShape
	Threads int // the threads one call ran on (GemmParallel's choice)
	Calls   int
	Time    time.Duration
}

// GFLOPs returns the calls' rate in GFLOP/s (2·M·N·K per call).
func (g GemmTime) GFLOPs() float64 {
	if g.Time <= 0 {
		return 0
	}
	return 2 * float64(g.M) * float64(g.N) * float64(g.K) * float64(g.Calls) / g.Time.Seconds() / 1e9
}

// gemmTimer is the running timer's record, or nil: one atomic load per
// GEMM when nothing is timed.
var gemmTimer atomic.Pointer[gemmRecord]

type gemmRecord struct {
	mu    sync.Mutex
	times map[gemmKey]*GemmTime
}

type gemmKey struct {
	GemmShape
	threads int
}

// TimeGemms starts timing every GEMM of the process (every goroutine's)
// and returns the function that stops it and returns the times, the
// longest first. One timer runs at a time: a second TimeGemms before the
// first stops reports ok false. Profiling tools use it (gotron bench
// --breakdown), the way runtime/pprof profiles the whole process.
func TimeGemms() (stop func() []GemmTime, ok bool) {
	r := &gemmRecord{times: map[gemmKey]*GemmTime{}}
	if !gemmTimer.CompareAndSwap(nil, r) {
		return nil, false
	}
	return func() []GemmTime {
		gemmTimer.CompareAndSwap(r, nil)
		r.mu.Lock()
		defer r.mu.Unlock()
		out := make([]GemmTime, 0, len(r.times))
		for _, t := range r.times {
			out = append(out, *t)
		}
		slices.SortFunc(out, func(a, b GemmTime) int { return cmp.Compare(b.Time, a.Time) })
		return out
	}, true
}

// timedGemm returns the record a GEMM starting now should add itself to
// (with add), or nil when no timer runs.
func timedGemm() *gemmRecord { return gemmTimer.Load() }

// add records one call of shape s on threads threads that started at start.
func (r *gemmRecord) add(s GemmShape, threads int, start time.Time) {
	d := time.Since(start)
	k := gemmKey{s, threads}
	r.mu.Lock()
	t := r.times[k]
	if t == nil {
		t = &GemmTime{GemmShape: s, Threads: threads}
		r.times[k] = t
	}
	t.Calls++
	t.Time += d
	r.mu.Unlock()
}
