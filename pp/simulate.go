package pp

import (
	"fmt"
	"math"
)

// StageTimes are the durations a simulation gives each action of a
// pipeline rank: a forward F, a backward B (the input gradient only when
// the backward is split; B + W when it is not) and its weight gradients W,
// of one microbatch on one model chunk, and Comm, the time a message takes
// from its send to its receiver. Every other action takes no time.
type StageTimes struct {
	F, B, W, Comm float64
}

// Simulation is what Simulate reports.
type Simulation struct {
	// Makespan is the time from the first action of any rank to the end of
	// the last.
	Makespan float64
	// Busy is each rank's compute time, M·V·(F + B + W).
	Busy []float64
	// Idle is each rank's idle fraction of the makespan.
	Idle []float64
	// BubbleRate is (Makespan − M·V·(F + B + W)) / Makespan: the idle
	// fraction of a rank whose compute fills the whole iteration but its
	// bubble (Qi et al. 2024's definition).
	BubbleRate float64
}

// Simulate plays every rank's schedule (already Verified) with the given
// action durations: each rank runs its actions in order; a send leaves at
// once and reaches its receiver Comm later; a blocking exchange ends when
// its last receive has arrived, an asynchronous one at once, its Wait
// when the awaited message has; a message on a channel (activations or
// gradients, one direction between two ranks) meets the receives of that
// channel in order. It is the same action list the executor runs, played
// with a clock instead of kernels.
func Simulate(schedules []*Schedule, t StageTimes) (*Simulation, error) {
	if err := checkShapes(schedules); err != nil {
		return nil, err
	}
	if t.F < 0 || t.B < 0 || t.W < 0 || t.Comm < 0 || math.IsNaN(t.F+t.B+t.W+t.Comm) || math.IsInf(t.F+t.B+t.W+t.Comm, 0) {
		return nil, fmt.Errorf("pp: stage times %+v: each must be finite and ≥ 0", t)
	}
	s := newSim(schedules, t)
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
	posted bool // the Comm action at pc has been issued
	// recvs are the issued receives not yet complete: their channel and
	// place in it.
	recvs map[Op]slot
}

// slot is a receive's message: the n-th on channel k.
type slot struct {
	k chanKey
	n int
}

// sim is a simulation's state: each rank's clock and each channel's sent
// messages (their arrival times, in send order) and receives taken.
type sim struct {
	ss    []*Schedule
	t     StageTimes
	ranks []simClock
	sent  map[chanKey][]float64
	taken map[chanKey]int
}

func newSim(ss []*Schedule, t StageTimes) *sim {
	s := &sim{ss: ss, t: t, ranks: make([]simClock, len(ss)), sent: map[chanKey][]float64{}, taken: map[chanKey]int{}}
	for r := range s.ranks {
		s.ranks[r].recvs = map[Op]slot{}
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

// channel is the channel an op of rank r uses, and whether it sends.
func (s *sim) channel(r int, o Op) (chanKey, bool) {
	p := len(s.ss)
	switch o.Dir {
	case SendNext:
		return chanKey{src: r, dst: (r + 1) % p}, true
	case RecvPrev:
		return chanKey{src: (r - 1 + p) % p, dst: r}, false
	case SendPrev:
		return chanKey{src: r, dst: (r - 1 + p) % p, grad: true}, true
	}
	return chanKey{src: (r + 1) % p, dst: r, grad: true}, false // RecvNext
}

// step runs rank r's next action if it can; it reports whether it did.
func (s *sim) step(r int) bool {
	c := &s.ranks[r]
	acts := s.ss[r].Actions
	if c.pc >= len(acts) {
		return false
	}
	a := acts[c.pc]
	switch a.Kind {
	case Forward:
		c.now += s.t.F
	case Backward:
		c.now += s.t.B
		if !s.ss[r].SplitBackward {
			c.now += s.t.W
		}
	case WeightGrad:
		c.now += s.t.W
	case Comm:
		end, ok := s.exchange(r, a)
		if !ok {
			return false
		}
		c.now = end
	case Wait:
		if _, send := s.channel(r, a.Op); send {
			break // a send has left when it was issued
		}
		at, ok := s.arrived(r, a.Op)
		if !ok {
			return false
		}
		delete(c.recvs, a.Op)
		c.now = max(c.now, at)
	}
	c.pc++
	return true
}

// post issues rank r's Comm action at pc, once, at the rank's time: its
// sends leave (an exchange's ops are issued together, so they leave
// before its receives are met) and its receives take their places in
// their channels. It reports whether it issued anything.
func (s *sim) post(r int) bool {
	c := &s.ranks[r]
	acts := s.ss[r].Actions
	if c.pc >= len(acts) || acts[c.pc].Kind != Comm || c.posted {
		return false
	}
	c.posted = true
	for _, o := range acts[c.pc].Ops {
		k, send := s.channel(r, o)
		if send {
			s.sent[k] = append(s.sent[k], c.now+s.t.Comm)
			continue
		}
		c.recvs[o] = slot{k, s.taken[k]}
		s.taken[k]++
	}
	return true
}

// arrived returns when the message of rank r's issued receive o arrives,
// once it has been sent.
func (s *sim) arrived(r int, o Op) (float64, bool) {
	sl, ok := s.ranks[r].recvs[o]
	if !ok || sl.n >= len(s.sent[sl.k]) {
		return 0, false
	}
	return s.sent[sl.k][sl.n], true
}

// exchange ends rank r's Comm action a, issued (post), and returns when: at once
// when async (its receives end at their Waits), else once the last
// message it receives has arrived, if every one has been sent.
func (s *sim) exchange(r int, a Action) (float64, bool) {
	c := &s.ranks[r]
	end := c.now
	if !a.Async {
		for _, o := range a.Ops {
			if _, send := s.channel(r, o); send {
				continue
			}
			at, ok := s.arrived(r, o)
			if !ok {
				return 0, false
			}
			end = max(end, at)
		}
		for _, o := range a.Ops {
			delete(c.recvs, o)
		}
	}
	c.posted = false
	return end, true
}

func (s *sim) result() *Simulation {
	res := &Simulation{}
	for _, c := range s.ranks {
		res.Makespan = max(res.Makespan, c.now)
	}
	sc := s.ss[0]
	work := float64(sc.Microbatches*max(sc.VPP, 1)) * (s.t.F + s.t.B + s.t.W)
	if sc.ForwardOnly {
		work = float64(sc.Microbatches*max(sc.VPP, 1)) * s.t.F
	}
	for range s.ranks {
		res.Busy = append(res.Busy, work)
		idle := 0.0
		if res.Makespan > 0 {
			idle = 1 - work/res.Makespan
		}
		res.Idle = append(res.Idle, idle)
	}
	if res.Makespan > 0 {
		res.BubbleRate = (res.Makespan - work) / res.Makespan
	}
	return res
}
