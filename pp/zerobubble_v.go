package pp

import (
	"fmt"
	"slices"

	"github.com/gotron/gotron/config"
)

// NameZBV is the zero-bubble ZB-V schedule (ZeroBubbleV).
const NameZBV = "zero_bubble_v"

// PlacementOf returns the placement of the model's chunks the schedule
// named (Config.Schedule) runs on: the V for ZB-V and DualPipeV, the
// reference's loop for every other. The trainer places its chunks so
// (config.TransformerConfig.PipelinePlacement).
func PlacementOf(schedule string) config.PipelinePlacement {
	if schedule == ScheduleZBV || schedule == ScheduleDualPipeV {
		return config.PlacementV
	}
	return config.PlacementLoop
}

// ZeroBubbleV returns rank's ZB-V schedule (Qi et al., "Zero Bubble
// Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, §6) for P = pp
// ranks and M = m microbatches: the model cut into 2P stages placed in a
// V (config.PlacementV: rank r holds stages r and 2P − 1 − r as its
// chunks 0 and 1), every backward split into B and W. With equal F, B and
// W times and no communication cost it has no bubble once M ≥ 2P − 1,
// while each rank holds at most 2P chunks' activations — P microbatches
// of its layers, the first stage's under 1F1B (Verify's PeakLive).
//
// Rank r's compute order, for N = max(M, 2P − 1) microbatches, those of
// M and more left out:
//
//  1. warm-up: 2(P − r) − 1 forwards of chunk 0, the time the first
//     microbatch takes to come back up the V to this rank's chunk 1;
//  2. r pairs F1 F0, chunk 1's forwards joining as its inputs arrive;
//  3. P − r triples F1 B1 W1, chunk 1's first backwards;
//  4. N − P steps F0 B0 W0 F1 B1 W1, F0 left out once chunk 0 has run all
//     its forwards: the steady state, each forward's activation freed by a
//     W before the next forward of its chunk;
//  5. cool-down: r pairs B0 B1, then P − r pairs B0 W0, then the W's put
//     off, chunk 1's then chunk 0's.
//
// The last rank hands its chunk 0's output to its chunk 1, and chunk 1's
// input gradient back to chunk 0, without a message. Every exchange is
// asynchronous, as in ZeroBubbleH2: a receive posted one microbatch ahead
// for each chunk and kind, a send waited for before the next of its kind
// and chunk. Activations and gradients travel between the same two ranks
// in both directions, so a communicator that matches messages only by the
// pair of ranks (comm's) must carry the two kinds apart (p2p's gradient
// group). It panics if pp < 1, rank is outside [0, pp) or m < 1.
//
// Forward-only (evaluation), it runs the same forwards in the same order.
func ZeroBubbleV(pp, rank, m int, forwardOnly, gradSyncFunc bool) *Schedule {
	if pp < 1 || rank < 0 || rank >= pp || m < 1 {
		panic(fmt.Sprintf("pp.ZeroBubbleV: rank %d of %d with %d microbatches", rank, pp, m))
	}
	return vSchedule(NameZBV, pp, rank, m, zbvOrder(pp, rank, m), forwardOnly, gradSyncFunc)
}

// vSchedule makes rank's schedule named name on the V placement from its
// compute order o over m microbatches (its forwards alone when
// forwardOnly), with withAsyncExchanges' exchanges.
func vSchedule(name string, pp, rank, m int, o []Action, forwardOnly, gradSyncFunc bool) *Schedule {
	if forwardOnly {
		o = slices.DeleteFunc(o, func(a Action) bool { return a.Kind != Forward })
	}
	warmup := 0
	for warmup < len(o) && o[warmup].Kind == Forward {
		warmup++
	}
	s := &Schedule{Name: name, PP: pp, VPP: 2, Microbatches: m, GroupSize: pp, Rank: rank,
		Warmup: warmup, Remaining: 2*m - warmup, AllWarmup: warmup == 2*m, SplitBackward: !forwardOnly,
		ForwardOnly: forwardOnly, Placement: config.PlacementV}
	return withAsyncExchanges(s, o, gradSyncFunc)
}

// zbvOrder is ZeroBubbleV's compute order on rank of pp, for m
// microbatches.
func zbvOrder(pp, rank, m int) []Action {
	n := max(m, 2*pp-1)
	var o zbvEmitter
	o.m = m
	for range 2*(pp-rank) - 1 {
		o.next(Forward, 0)
	}
	for range rank {
		o.next(Forward, 1)
		o.next(Forward, 0)
	}
	for range pp - rank {
		o.next(Forward, 1)
		o.next(Backward, 1)
		o.next(WeightGrad, 1)
	}
	for range n - pp {
		if o.count[Forward][0] < n {
			o.next(Forward, 0)
		}
		for _, c := range []int{0, 1} {
			if c == 1 {
				o.next(Forward, 1)
			}
			o.next(Backward, c)
			o.next(WeightGrad, c)
		}
	}
	for range rank {
		o.next(Backward, 0)
		o.next(Backward, 1)
	}
	for range pp - rank {
		o.next(Backward, 0)
		o.next(WeightGrad, 0)
	}
	for _, c := range []int{1, 0} {
		for o.count[WeightGrad][c] < n {
			o.next(WeightGrad, c)
		}
	}
	return o.order
}

// zbvEmitter numbers each chunk's forwards, backwards and W's in
// microbatch order as zbvOrder emits them, keeping those below m.
type zbvEmitter struct {
	m     int
	count [WeightGrad + 1][2]int
	order []Action
}

func (z *zbvEmitter) next(k Kind, c int) {
	x := z.count[k][c]
	z.count[k][c]++
	if x < z.m {
		z.order = append(z.order, Action{Kind: k, Microbatch: x, Chunk: c})
	}
}

// checkV refuses a schedule on the V placement (name: ZB-V or DualPipeV)
// where it cannot run: it pipelines two model chunks per rank, in a V,
// over at least two ranks, its exchanges not overlapped by the
// interleaved schedule's mechanism.
func checkV(c Config, name string) error {
	switch {
	case c.PP < 2:
		return fmt.Errorf("--pipeline-schedule %s: pipeline_model_parallel_size = %d has no pipeline bubble to fill: use it with %s ≥ 2, or drop the flag", name, c.PP, flagPP)
	case c.VPP != 2:
		return fmt.Errorf("--pipeline-schedule %s runs two model chunks per rank, one down the pipeline and one back up, but virtual_pipeline_model_parallel_size is %s: set %s 2 (or a layout of 2·P stages)", name, vppText(c.VPP), flagVPP)
	case c.OverlapP2PComm:
		return fmt.Errorf("--pipeline-schedule %s exchanges tensors asynchronously on its own: turn --overlap-p2p-communication off", name)
	}
	return nil
}

// vppText prints virtual_pipeline_model_parallel_size, 0 as unset.
func vppText(v int) string {
	if v == 0 {
		return "unset"
	}
	return fmt.Sprint(v)
}
