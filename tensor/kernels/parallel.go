package kernels

import "sync"

// Chunk returns worker w's share [lo, hi) of [0, n) split into workers contiguous chunks:
// lo = w·n/workers, hi = (w+1)·n/workers. The chunks cover [0, n) in order, differ in size by
// at most one, and depend only on (n, workers, w), so a computation split this way is
// reproducible run to run.
func Chunk(n, workers, w int) (lo, hi int) {
	return w * n / workers, (w + 1) * n / workers
}

// ParallelFor calls fn(lo, hi) on the chunks of [0, n) given by [Chunk] for
// min(workers, n) workers, each on its own goroutine (the first on the caller's), and
// returns when all have returned. With workers ≤ 1 or n ≤ 1 it calls fn(0, n) directly
// (nothing when n ≤ 0). The kernels are single-threaded; callers split rows with this.
//
// A panic in fn is re-raised in the caller after every chunk has finished.
func ParallelFor(n, workers int, fn func(lo, hi int)) {
	ParallelForWorker(n, workers, func(_, lo, hi int) { fn(lo, hi) })
}

// ParallelForWorker is [ParallelFor] that also passes the worker index w in
// [0, min(workers, n)), so that callers can give each worker its own partial buffer for
// accumulated results (the dw, db of [LayerNormBackward], the dbias of [BiasGeluBackward])
// and sum them afterwards in worker order, which keeps the result deterministic.
func ParallelForWorker(n, workers int, fn func(w, lo, hi int)) {
	if n <= 0 {
		return
	}
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		fn(0, 0, n)
		return
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked bool
		panicVal any
	)
	run := func(w int) {
		defer func() {
			if p := recover(); p != nil {
				mu.Lock()
				if !panicked {
					panicked, panicVal = true, p
				}
				mu.Unlock()
			}
		}()
		lo, hi := Chunk(n, workers, w)
		fn(w, lo, hi)
	}
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			run(w)
		}()
	}
	run(0)
	wg.Wait()
	if panicked {
		panic(panicVal)
	}
}
