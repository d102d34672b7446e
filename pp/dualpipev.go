package pp

import "fmt"

// NameDualPipeV is DeepSeek's DualPipeV schedule (DualPipeV).
const NameDualPipeV = "dualpipev"

// DualPipeV returns rank's DualPipeV schedule (DeepSeek-AI, "DeepSeek-V3
// Technical Report", arXiv 2412.19437, §3.2.1, and its V-shaped variant
// in github.com/deepseek-ai/DualPipe) for P = pp ranks and M = m ≥ 2P
// microbatches, on the V placement of ZeroBubbleV (rank r holds stages r
// and 2P − 1 − r as its chunks 0 and 1). Where ZB-V splits every backward,
// DualPipeV runs most of them whole, a forward of one chunk beside a
// backward of the other (on a GPU the two overlap, each one's
// communication hidden by the other's computation; here they run one
// after the other), and splits only around the warm-up and the
// cool-down, where the deferred weight gradients fill the bubble. Rank
// r's compute order:
//
//  1. 2(P − r − 1) forwards of chunk 0;
//  2. r + 1 pairs F0 F1;
//  3. P − r − 1 triples B1 W1 F1, each W right after its B, apart;
//  4. M − 2P + r + 1 steps F0 B1 F1 B0, every backward whole;
//  5. P − r − 1 steps B1 F1 B0;
//  6. r + 1 pairs B1 B0, the second half of them with their W's put off
//     (from the middle pair on, its B0 first on even ranks);
//  7. P − r − 1 pairs W B0, each W the oldest put off, each B0's put off;
//  8. the r + 1 W's left, oldest first.
//
// Each chunk's W's run in microbatch order, so the gradients are the
// interleaved 1F1B's bit for bit. Exchanges, no_sync and the hand-over on
// the last rank are ZeroBubbleV's. Forward-only, it runs the same
// forwards in the same order. It panics if pp < 1, rank is outside
// [0, pp) or m < 2·pp (Build refuses it first).
func DualPipeV(pp, rank, m int, forwardOnly, gradSyncFunc bool) *Schedule {
	if pp < 1 || rank < 0 || rank >= pp || m < 2*pp {
		panic(fmt.Sprintf("pp.DualPipeV: rank %d of %d with %d microbatches", rank, pp, m))
	}
	return vSchedule(NameDualPipeV, pp, rank, m, dualPipeVOrder(pp, rank, m), forwardOnly, gradSyncFunc)
}

// dualPipeVOrder is DualPipeV's compute order on rank of pp, for m ≥ 2·pp
// microbatches.
func dualPipeVOrder(pp, rank, m int) []Action {
	var o dpvEmitter
	for range 2 * (pp - rank - 1) {
		o.forward(0)
	}
	for range rank + 1 {
		o.forward(0)
		o.forward(1)
	}
	for range pp - rank - 1 {
		o.backward(1, true)
		o.weightGrad()
		o.forward(1)
	}
	for range m - 2*pp + rank + 1 {
		o.forward(0)
		o.backward(1, false)
		o.forward(1)
		o.backward(0, false)
	}
	for range pp - rank - 1 {
		o.backward(1, false)
		o.forward(1)
		o.backward(0, false)
	}
	half := (rank + 1) / 2
	for i := range rank + 1 {
		o.backward(1, i > half || i == half && rank%2 == 1)
		o.backward(0, i >= half)
	}
	for range pp - rank - 1 {
		o.weightGrad()
		o.backward(0, true)
	}
	for range rank + 1 {
		o.weightGrad()
	}
	if len(o.deferred) > 0 { // unreachable: the counts above balance
		panic(fmt.Sprintf("pp.DualPipeV: %d weight gradients left over", len(o.deferred)))
	}
	return o.order
}

// dpvEmitter numbers each chunk's forwards and backwards in microbatch
// order as dualPipeVOrder emits them, and queues the weight gradients
// put off.
type dpvEmitter struct {
	f, b     [2]int
	deferred []Action // W's put off, oldest first
	order    []Action
}

func (e *dpvEmitter) forward(c int) {
	e.order = append(e.order, Action{Kind: Forward, Microbatch: e.f[c], Chunk: c})
	e.f[c]++
}

// backward emits B of chunk c's next microbatch, its W right after it or,
// when deferred, queued for a later weightGrad.
func (e *dpvEmitter) backward(c int, deferred bool) {
	x := e.b[c]
	e.b[c]++
	e.order = append(e.order, Action{Kind: Backward, Microbatch: x, Chunk: c})
	w := Action{Kind: WeightGrad, Microbatch: x, Chunk: c}
	if deferred {
		e.deferred = append(e.deferred, w)
		return
	}
	e.order = append(e.order, w)
}

// weightGrad emits the oldest W put off.
func (e *dpvEmitter) weightGrad() {
	e.order = append(e.order, e.deferred[0])
	e.deferred = e.deferred[1:]
}

// checkDualPipeV refuses DualPipeV where it cannot run: ZB-V's rules, and
// at least 2P microbatches, which its warm-up and cool-down assume.
func checkDualPipeV(c Config) error {
	if err := checkV(c, ScheduleDualPipeV); err != nil {
		return err
	}
	if c.Microbatches > 0 && c.Microbatches < 2*c.PP { // (0: not known yet)
		return fmt.Errorf("--pipeline-schedule %s needs at least 2·pipeline_model_parallel_size = %d microbatches per iteration, which its warm-up and cool-down assume, but there are %d: "+
			"raise --global-batch-size to %d × --micro-batch-size × the data-parallel size (--num-microbatches %d in gotron bench and inspect), or choose %s", ScheduleDualPipeV, 2*c.PP, c.Microbatches, 2*c.PP, 2*c.PP, ScheduleZBV)
	}
	return nil
}
