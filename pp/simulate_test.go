package pp

import (
	"math"
	"strings"
	"testing"
)

// simulate builds every rank's schedule of cfg and simulates it.
func simulate(t *testing.T, cfg Config, st StageTimes) *Simulation {
	t.Helper()
	ss, err := BuildAll(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ss); err != nil {
		t.Fatal(err)
	}
	res, err := Simulate(ss, st)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSimulateHandArithmetic: with equal F, B and W and no communication
// time, 1F1B's makespan is M·(F+B+W) + (P−1)·(F+B+W) (its bubble) and
// ZB-H1's M·(F+B+W) + (P−1)·(F+B−W), a third of it (Qi et al. 2024, §2.1);
// with no pipeline there is no bubble.
func TestSimulateHandArithmetic(t *testing.T) {
	st := StageTimes{F: 1, B: 1, W: 1}
	for _, p := range []int{2, 3, 4, 8} {
		for _, m := range []int{p, 2 * p, 3*p + 1} {
			one := simulate(t, Config{PP: p, Microbatches: m}, st)
			if want := float64(3*m + 3*(p-1)); one.Makespan != want {
				t.Errorf("1F1B, P %d, M %d: makespan %g, want %g", p, m, one.Makespan, want)
			}
			zb := simulate(t, Config{PP: p, Microbatches: m, Schedule: ScheduleZBH1}, st)
			if want := float64(3*m + (p - 1)); zb.Makespan != want {
				t.Errorf("ZB-H1, P %d, M %d: makespan %g, want %g", p, m, zb.Makespan, want)
			}
			if want := float64(p-1) / float64(3*m+p-1); math.Abs(zb.BubbleRate-want) > 1e-12 {
				t.Errorf("ZB-H1, P %d, M %d: bubble rate %g, want %g", p, m, zb.BubbleRate, want)
			}
		}
	}
	if one := simulate(t, Config{PP: 1, Microbatches: 4}, st); one.Makespan != 12 || one.BubbleRate != 0 {
		t.Errorf("no pipelining: %+v, want a makespan of 12 and no bubble", one)
	}
}

// TestSimulateInterleaved: the interleaved schedule at equal per-chunk
// times has the bubble (P − 1)·(F+B+W) of chunk-sized steps, V times
// smaller than 1F1B's relative to the work M·V·(F+B+W), with overlapped
// exchanges (their Waits) and, at P > 2, batched ones; a message's time
// shows in the makespan.
func TestSimulateInterleaved(t *testing.T) {
	st := StageTimes{F: 1, B: 1, W: 1}
	for _, p := range []int{2, 4} {
		for _, m := range []int{p, 2 * p} {
			for _, overlap := range []bool{true, false} {
				if !overlap && p == 2 {
					continue // refused: the two directions would share a peer in one batch
				}
				cfg := Config{PP: p, VPP: 2, Microbatches: m, OverlapP2PComm: overlap, BatchP2PComm: !overlap, DeallocatePipelineOutputs: true}
				got := simulate(t, cfg, st)
				if want := float64(3*2*m + 3*(p-1)); got.Makespan != want {
					t.Errorf("P %d, V 2, M %d, overlap %v: makespan %g, want %g", p, m, overlap, got.Makespan, want)
				}
			}
		}
	}
	slow := simulate(t, Config{PP: 2, Microbatches: 4}, StageTimes{F: 1, B: 1, W: 1, Comm: 0.5})
	if slow.Makespan <= 15 {
		t.Errorf("1F1B with a message time of 0.5: makespan %g, want above the 15 without", slow.Makespan)
	}
}

// TestSimulateZeroBubbleH2: at equal F, B and W and no communication time
// every stage of ZB-H2 computes without a gap from its first forward to
// its last W, so the makespan is the work, M·(F+B+W), and the bubble rate
// 0 (Qi et al. 2024, §2.2, Table 1's (P−1)(F+B−2W)), once there are enough
// microbatches to fill the warmup (M ≥ 2P − 1); the last stage starts
// P − 1 forwards late and so ends P − 1 after the first.
func TestSimulateZeroBubbleH2(t *testing.T) {
	st := StageTimes{F: 1, B: 1, W: 1}
	for _, p := range []int{2, 3, 4, 8} {
		for _, m := range []int{2*p - 1, 2 * p, 3*p + 1} {
			zb := simulate(t, Config{PP: p, Microbatches: m, Schedule: ScheduleZBH2}, st)
			if want := float64(3 * m); zb.Makespan != want || zb.BubbleRate != 0 {
				t.Errorf("ZB-H2, P %d, M %d: makespan %g, bubble rate %g, want %g and 0", p, m, zb.Makespan, zb.BubbleRate, want)
			}
			if want := float64(3*m + p - 1); zb.End != want {
				t.Errorf("ZB-H2, P %d, M %d: ends at %g, want %g", p, m, zb.End, want)
			}
		}
	}
	// With F+B > 2W the bubble is (P−1)(F+B−2W).
	st = StageTimes{F: 1, B: 1.5, W: 0.5}
	for _, p := range []int{2, 4} {
		m := 3 * p
		zb := simulate(t, Config{PP: p, Microbatches: m, Schedule: ScheduleZBH2}, st)
		if want := float64(m)*3 + float64(p-1)*(1+1.5-1); math.Abs(zb.Makespan-want) > 1e-9 {
			t.Errorf("ZB-H2, P %d, M %d, F 1 B 1.5 W 0.5: makespan %g, want %g", p, m, zb.Makespan, want)
		}
	}
}

// TestSimulateTimeline: the simulation's timeline holds every rank's
// computations, a unit a millisecond: ZB-H2's ranks at P 4, M 8 and equal
// times each compute 24 units, and the drawing says it is simulated.
func TestSimulateTimeline(t *testing.T) {
	sim := simulate(t, Config{PP: 4, Microbatches: 8, Schedule: ScheduleZBH2}, StageTimes{F: 1, B: 1, W: 1})
	tl := sim.Timeline
	if tl == nil || len(tl.Ranks) != 4 || tl.Simulated == nil {
		t.Fatalf("timeline %+v", tl)
	}
	for r, spans := range tl.Ranks {
		var busy int64
		n := 0
		for _, s := range spans {
			if s.Kind.computes() {
				busy += s.End - s.Start
				n++
			}
		}
		if busy != 24e6 || n != 24 {
			t.Errorf("rank %d: %d computations for %d ns, want 24 for 24e6", r, n, busy)
		}
	}
	var b strings.Builder
	if err := tl.SVG(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "simulated") || !strings.Contains(b.String(), ">weight gradients<") {
		t.Errorf("the drawing does not say it is simulated, or has no W:\n%.400s", b.String())
	}
}

// TestEqualTimesBubble: the simulated bubble at equal times is
// (P−1)/(V·M+P−1) for 1F1B and the interleaved schedule, and 0 for ZB-V
// from 2P − 1 microbatches.
func TestEqualTimesBubble(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want float64
	}{
		{Config{PP: 4, Microbatches: 8}, TheoreticalBubble(4, 1, 8)},
		{Config{PP: 4, VPP: 2, Microbatches: 8, OverlapP2PComm: true}, TheoreticalBubble(4, 2, 8)},
		{Config{PP: 4, VPP: 2, Microbatches: 8, Schedule: ScheduleZBV}, 0},
	} {
		got, err := EqualTimesBubble(c.cfg)
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v: %v, %v; want %v", c.cfg, got, err, c.want)
		}
	}
}

// TestSimulateStages: a slow last stage of 1F1B at P 2 never waits once it
// has begun, so the iteration is the first stage's forward, the last
// stage's M forwards and backwards back to back, and the first stage's
// last backward; each rank's Busy is its own work, and the bubble rate is
// the busiest rank's idle share.
func TestSimulateStages(t *testing.T) {
	ss, err := BuildAll(Config{PP: 2, Microbatches: 4})
	if err != nil {
		t.Fatal(err)
	}
	times := func(r, _ int) StageTimes {
		if r == 1 {
			return StageTimes{F: 10, B: 7, W: 3}
		}
		return StageTimes{F: 1, B: 1}
	}
	res, err := SimulateStages(ss, 0, times)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 4*20 + 1.0; res.End != want || res.Makespan != want {
		t.Errorf("end %g, makespan %g; want %g", res.End, res.Makespan, want)
	}
	if res.Busy[0] != 8 || res.Busy[1] != 80 {
		t.Errorf("busy %v, want [8 80]", res.Busy)
	}
	if want := (82 - 80) / 82.0; math.Abs(res.BubbleRate-want) > 1e-15 {
		t.Errorf("bubble rate %g, want %g", res.BubbleRate, want)
	}
	// A message time delays the last stage's start and the first stage's
	// last backward by one message each, and each of the last stage's
	// three blocking send-backward-receive-forward exchanges by one.
	res, err = SimulateStages(ss, 0.5, times)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 0.5 + 80 + 3*0.5 + 0.5 + 1; res.End != want {
		t.Errorf("with messages of 0.5: end %g, want %g", res.End, want)
	}
	if _, err := SimulateStages(ss, 0, func(int, int) StageTimes { return StageTimes{F: math.NaN()} }); err == nil {
		t.Error("a NaN forward time was accepted")
	}
}
