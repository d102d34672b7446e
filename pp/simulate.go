package pp

import (
	"fmt"
	"math"
)

// StageTimes are the durations a simulation gives each action of a
// pipeline rank: a forward F, a backward B (the input gradient only when
// the backward is split; B + W when it is not) and its weight gradients W,
// of one microbatch on one model chunk, and Comm, the time a message takes
// from its send to its receiver. Every other action takes no time, the
// deferred output-layer weight gradients (EmbeddingWgrad) included: the
// times have no part for the output layer alone.
type StageTimes struct {
	F, B, W, Comm float64
}

// Simulation is what Simulate reports.
type Simulation struct {
	// Makespan is the longest stage's time, from its first computation
	// to the end of its last action: Qi et al. 2024's cost, the time the
	// iteration takes once pipelines follow each other. A stage that
	// starts later (the first input reaches stage s after s forwards)
	// counts from its start; in 1F1B and the interleaved schedule the
	// first stage starts first and ends last, and it is End.
	Makespan float64
	// End is the time from the first action of any rank to the end of
	// the last.
	End float64
	// Busy is each rank's compute time, M·V·(F + B + W) at equal times.
	Busy []float64
	// Idle is each rank's idle fraction of the makespan.
	Idle []float64
	// BubbleRate is (Makespan − the busiest rank's Busy) / Makespan,
	// (Makespan − M·V·(F + B + W)) / Makespan at equal times: the idle
	// fraction of a rank whose compute fills the whole iteration but its
	// bubble (Qi et al. 2024's definition).
	BubbleRate float64
	// Timeline is the simulated iteration, one time unit a millisecond,
	// for drawing (Timeline.SVG).
	Timeline *Timeline
}

// Simulate plays every rank's schedule (already Verified) with the given
// action durations: each rank runs its actions in order; a send and its
// receive meet when both have been issued (a rendezvous, as comm's
// point-to-point ops), and the message arrives Comm later, completing
// both; a blocking exchange ends when all its ops have completed, an
// asynchronous one at once, its Waits when their ops have; the messages
// of a channel (activations or gradients, one direction between two
// ranks) meet its receives in order. It is the same action list the
// executor runs, played with a clock instead of kernels.
func Simulate(schedules []*Schedule, t StageTimes) (*Simulation, error) {
	res, err := SimulateStages(schedules, t.Comm, func(int, int) StageTimes { return t })
	if err != nil {
		return nil, err
	}
	res.Timeline.Simulated = &t
	return res, nil
}

// SimulateStages is Simulate with each model chunk's own durations:
// times(r, c) gives the F, B and W of chunk c on pipeline rank r (its
// Comm is not read), and every message takes comm. A rank's Busy is the
// sum of its computations, and BubbleRate is (Makespan − the busiest
// rank's Busy) / Makespan: Simulate's when the times are equal.
func SimulateStages(schedules []*Schedule, comm float64, times func(r, c int) StageTimes) (*Simulation, error) {
	if err := checkShapes(schedules); err != nil {
		return nil, err
	}
	s := newSim(schedules, comm)
	for r, sc := range schedules {
		for c := range max(sc.VPP, 1) {
			t := times(r, c)
			t.Comm = comm
			if t.F < 0 || t.B < 0 || t.W < 0 || t.Comm < 0 || math.IsNaN(t.F+t.B+t.W+t.Comm) || math.IsInf(t.F+t.B+t.W+t.Comm, 0) {
				return nil, fmt.Errorf("pp: stage times %+v of rank %d, chunk %d: each must be finite and ≥ 0", t, r, c)
			}
			s.ranks[r].times = append(s.ranks[r].times, t)
		}
	}
	for !s.done() {
		progress := false
		for r := range schedules {
			for {
				posted := s.post(r) // a Comm's sends leave before it waits
				if !s.step(r) && !posted {
					break
				}
				progress = true
			}
		}
		if !progress {
			return nil, fmt.Errorf("pp: simulate: the ranks wait for each other (run Verify first)")
		}
	}
	return s.result(), nil
}

// simClock is one rank's progress in a simulation.
type simClock struct {
	pc     int
	now    float64
	start  float64 // when the first computation began
	began  bool
	spans  []Span
	posted bool // the Comm action at pc has been issued
	// times are the durations of each of the rank's model chunks, and
	// busy its computations' total so far.
	times []StageTimes
	busy  float64
	// ops are the issued ops not yet complete: their channel and place
	// in it.
	ops map[Op]slot
}

// slot is an op's message: the n-th sent or received on channel k.
type slot struct {
	k    chanKey
	n    int
	send bool
}

// sim is a simulation's state: each rank's clock and, for each channel,
// when its sends and its receives were issued, in order.
type sim struct {
	ss    []*Schedule
	comm  float64 // a message's time
	ranks []simClock
	sends map[chanKey][]float64
	recvs map[chanKey][]float64
}

func newSim(ss []*Schedule, comm float64) *sim {
	s := &sim{ss: ss, comm: comm, ranks: make([]simClock, len(ss)), sends: map[chanKey][]float64{}, recvs: map[chanKey][]float64{}}
	for r := range s.ranks {
		s.ranks[r].ops = map[Op]slot{}
	}
	return s
}

func (s *sim) done() bool {
	for r, c := range s.ranks {
		if c.pc < len(s.ss[r].Actions) {
			return false
		}
	}
	return true
}

// channel is the channel an op of rank r uses (route's), and whether it
// sends.
func (s *sim) channel(r int, o Op) (chanKey, bool) {
	k, _ := route(s.ss[r], r, o, false)
	return k, o.Dir == SendNext || o.Dir == SendPrev
}

// step runs rank r's next action if it can; it reports whether it did.
func (s *sim) step(r int) bool {
	c := &s.ranks[r]
	acts := s.ss[r].Actions
	if c.pc >= len(acts) {
		return false
	}
	a := acts[c.pc]
	if !c.began && a.Kind.computes() {
		c.start, c.began = c.now, true
	}
	from := c.now
	switch a.Kind {
	case Forward, Backward, WeightGrad:
		d := c.duration(a, s.ss[r].SplitBackward)
		c.now += d
		c.busy += d
	case Comm:
		end, ok := s.exchange(r, a)
		if !ok {
			return false
		}
		c.now = end
	case Wait:
		at, ok := s.complete(r, a.Op)
		if !ok {
			return false
		}
		delete(c.ops, a.Op)
		c.now = max(c.now, at)
	}
	if a.Kind.computes() || a.Kind == Comm || a.Kind == Wait {
		c.spans = append(c.spans, Span{Kind: a.Kind, Microbatch: a.Microbatch, Chunk: a.Chunk, Start: simNanos(from), End: simNanos(c.now)})
	}
	c.pc++
	return true
}

// duration is how long a computation of the rank takes: its chunk's F,
// B (B + W when the backward is not split) or W.
func (c *simClock) duration(a Action, split bool) float64 {
	t := c.times[a.Chunk]
	switch a.Kind {
	case Forward:
		return t.F
	case Backward:
		if !split {
			return t.B + t.W
		}
		return t.B
	}
	return t.W
}

// simNanos is a simulated time in Span's nanoseconds, a unit a
// millisecond.
func simNanos(t float64) int64 { return int64(math.Round(t * 1e6)) }

// post issues rank r's Comm action at pc, once, at the rank's time: each
// op takes its place in its channel. It reports whether it issued
// anything.
func (s *sim) post(r int) bool {
	c := &s.ranks[r]
	acts := s.ss[r].Actions
	if c.pc >= len(acts) || acts[c.pc].Kind != Comm || c.posted {
		return false
	}
	c.posted = true
	for _, o := range acts[c.pc].Ops {
		k, send := s.channel(r, o)
		q := s.recvs
		if send {
			q = s.sends
		}
		c.ops[o] = slot{k, len(q[k]), send}
		q[k] = append(q[k], c.now)
	}
	return true
}

// complete returns when rank r's issued op o completes, once its
// counterpart has been issued: a send and its receive meet when both are
// issued, and the message arrives Comm later; both complete then.
func (s *sim) complete(r int, o Op) (float64, bool) {
	sl, ok := s.ranks[r].ops[o]
	if !ok {
		return 0, false
	}
	mine, theirs := s.recvs[sl.k], s.sends[sl.k]
	if sl.send {
		mine, theirs = theirs, mine
	}
	if sl.n >= len(theirs) {
		return 0, false
	}
	return max(mine[sl.n], theirs[sl.n]) + s.comm, true
}

// exchange ends rank r's Comm action a, issued (post), and returns when:
// at once when async (its ops end at their Waits), else when its last op
// completes, if every op's counterpart has been issued.
func (s *sim) exchange(r int, a Action) (float64, bool) {
	c := &s.ranks[r]
	end := c.now
	if !a.Async {
		for _, o := range a.Ops {
			at, ok := s.complete(r, o)
			if !ok {
				return 0, false
			}
			end = max(end, at)
		}
		for _, o := range a.Ops {
			delete(c.ops, o)
		}
	}
	c.posted = false
	return end, true
}

func (s *sim) result() *Simulation {
	sc := s.ss[0]
	res := &Simulation{Timeline: &Timeline{PP: len(s.ss), VPP: max(sc.VPP, 1), Microbatches: sc.Microbatches}}
	busiest := 0.0
	for r, c := range s.ranks {
		res.Timeline.Ranks = append(res.Timeline.Ranks, c.spans)
		res.Timeline.PPRank = append(res.Timeline.PPRank, r)
		res.End = max(res.End, c.now)
		res.Makespan = max(res.Makespan, c.now-c.start)
		res.Busy = append(res.Busy, c.busy)
		busiest = max(busiest, c.busy)
	}
	for _, b := range res.Busy {
		idle := 0.0
		if res.Makespan > 0 {
			idle = 1 - b/res.Makespan
		}
		res.Idle = append(res.Idle, idle)
	}
	if res.Makespan > 0 {
		res.BubbleRate = (res.Makespan - busiest) / res.Makespan
	}
	return res
}

// EqualTimesBubble is the bubble rate Simulate gives cfg's schedules
// with equal F, B and W and no message time: TheoreticalBubble for 1F1B
// and the interleaved schedule, the zero-bubble schedules' own (ZB-H1's
// (P − 1)(F + B − W) over its makespan; none for ZB-H2 and ZB-V once M ≥
// 2P − 1). It is the figure a measured bubble is compared with.
func EqualTimesBubble(cfg Config) (float64, error) {
	ss, err := BuildAll(cfg)
	if err != nil {
		return 0, err
	}
	sim, err := Simulate(ss, StageTimes{F: 1, B: 1, W: 1})
	if err != nil {
		return 0, err
	}
	return sim.BubbleRate, nil
}
