package train

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
)

// timedNames are the timers --timing-log-level reports, in the order of
// the reference's training_log (megatron/training/training.py), with
// gotron's split-backward weight-gradient step after the backward: the
// schedules' passes and steps, the pipeline communicator's calls, and the
// optimizer. Every rank gathers all of them, 0 for those it never ran.
var timedNames = []string{
	"forward-backward", "forward-compute", "backward-compute", "backward-weight-compute",
	"forward-recv", "forward-send", "backward-recv", "backward-send",
	"forward-send-forward-recv", "forward-send-backward-recv", "backward-send-forward-recv",
	"backward-send-backward-recv", "forward-backward-send-forward-backward-recv",
	"optimizer",
}

// TimingLogOptions are --timing-log-option's values: how the timers'
// times over the ranks are reported.
var TimingLogOptions = []string{"minmax", "max", "all"}

// timers is Megatron's Timers on one rank (megatron/core/timers.py):
// wall-clock timers by name, each made at a log level, those above
// --timing-log-level doing nothing. A timer is started and stopped on its
// rank's goroutine; logTimers gathers and resets them.
type timers struct {
	level int
	m     map[string]*wallTimer
}

// wallTimer accumulates the time between its Starts and Stops.
type wallTimer struct {
	started time.Time
	running bool
	elapsed time.Duration
}

func (t *wallTimer) Start(bool) {
	if !t.running {
		t.started, t.running = time.Now(), true
	}
}

func (t *wallTimer) Stop(bool) {
	if t.running {
		t.elapsed += time.Since(t.started)
		t.running = false
	}
}

// noTimer is a timer above the log level: it does nothing.
type noTimer struct{}

func (noTimer) Start(bool) {}
func (noTimer) Stop(bool)  {}

// newTimers returns the rank's timers at log level level (0: none of the
// reported ones run; the iteration's time is always on the line).
func newTimers(level int) *timers { return &timers{level: level, m: map[string]*wallTimer{}} }

// get is the config.TimersFunc: the timer called name, made at logLevel
// (−1: the level it has, or 0) when new.
func (ts *timers) get(name string, logLevel int) config.Timer {
	if t, ok := ts.m[name]; ok {
		return t
	}
	if logLevel > ts.level {
		return noTimer{}
	}
	t := &wallTimer{}
	ts.m[name] = t
	return t
}

// gather returns every rank's elapsed nanoseconds of each of timedNames,
// [rank][name], and resets the timers: a collective over world.
func (ts *timers) gather(ctx context.Context, world comm.Group) ([][]int64, error) {
	n := len(timedNames)
	mine := make([]int64, n)
	for i, name := range timedNames {
		if t := ts.m[name]; t != nil {
			mine[i] = int64(t.elapsed)
			t.elapsed = 0
		}
	}
	all := make([]int64, n*world.Size())
	if err := world.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return nil, fmt.Errorf("--timing-log-level: gathering the timers over %s: %w", world.Name(), err)
	}
	out := make([][]int64, world.Size())
	for r := range out {
		out[r] = all[r*n : (r+1)*n]
	}
	return out, nil
}

// levelOneTimers are the timers of --timing-log-level 1; the others are
// level 2's.
var levelOneTimers = []string{"forward-backward", "optimizer"}

// timersAtLevel returns the gathered times with the timers above level
// zeroed (left out of the report): --log-straggler runs the level-2
// timers whatever --timing-log-level reports.
func timersAtLevel(times [][]int64, level int) [][]int64 {
	if level >= 2 {
		return times
	}
	out := make([][]int64, len(times))
	for r, t := range times {
		out[r] = make([]int64, len(t))
		for i, name := range timedNames {
			if slices.Contains(levelOneTimers, name) {
				out[r][i] = t[i]
			}
		}
	}
	return out
}

// formatTimers is Megatron's report of the gathered times, each divided
// by the iterations of the interval, in ms, under option ("minmax": the
// least and the most over the ranks that ran the timer; "max"; "all":
// every rank's); a timer no rank ran is left out, and "" when none ran.
func formatTimers(times [][]int64, iterations int, option string) string {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 / float64(max(iterations, 1)) }
	var b strings.Builder
	for i, name := range timedNames {
		var ran []int64
		for _, r := range times {
			if r[i] > 0 {
				ran = append(ran, r[i])
			}
		}
		if len(ran) == 0 {
			continue
		}
		label := (name + " ") + strings.Repeat(".", max(0, 48-len(name)-1))
		switch option {
		case "max":
			fmt.Fprintf(&b, "\n    %s: %.2f", label, ms(slices.Max(ran)))
		case "all":
			fmt.Fprintf(&b, "\n  %s:", name)
			for r, t := range times {
				if t[i] > 0 {
					fmt.Fprintf(&b, "\n     rank %2d: %.2f", r, ms(t[i]))
				}
			}
		default:
			fmt.Fprintf(&b, "\n    %s: (%.2f, %.2f)", label, ms(slices.Min(ran)), ms(slices.Max(ran)))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	head := map[string]string{"max": "max time across ranks (ms):", "all": "times across ranks (ms):"}[option]
	if head == "" {
		head = "(min, max) time across ranks (ms):"
	}
	return head + b.String() + "\n"
}

// stragglerPhases are the timers --log-straggler compares: the
// computations, whose times a slow rank lengthens, not the communication
// and the steps around it, where the other ranks wait for it.
var stragglerPhases = []string{"forward-compute", "backward-compute", "backward-weight-compute"}

// formatStragglers is --log-straggler's report of the gathered times: for
// each of stragglerPhases that two or more ranks ran, the ranks slower than the
// median of those ranks by more than threshold (a fraction), the count
// slowest at most, each with its time per iteration and its excess; one
// line saying there are none otherwise.
func formatStragglers(times [][]int64, iterations int, threshold float64, count int) string {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 / float64(max(iterations, 1)) }
	var b strings.Builder
	for i, name := range timedNames {
		if !slices.Contains(stragglerPhases, name) {
			continue
		}
		type rankTime struct {
			rank int
			ns   int64
		}
		var ran []rankTime
		for r, t := range times {
			if t[i] > 0 {
				ran = append(ran, rankTime{r, t[i]})
			}
		}
		if len(ran) < 2 {
			continue
		}
		ns := make([]int64, len(ran))
		for k, rt := range ran {
			ns[k] = rt.ns
		}
		med := median(ns)
		slices.SortStableFunc(ran, func(x, y rankTime) int { return int(y.ns - x.ns) })
		var slow []string
		for _, rt := range ran[:min(count, len(ran))] {
			if float64(rt.ns) > (1+threshold)*med {
				slow = append(slow, fmt.Sprintf("rank %d %.2f ms (+%.0f%%)", rt.rank, ms(rt.ns), 100*(float64(rt.ns)/med-1)))
			}
		}
		if len(slow) > 0 {
			fmt.Fprintf(&b, "\n    %s: median %.2f ms; %s", name, med/1e6/float64(max(iterations, 1)), strings.Join(slow, ", "))
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("stragglers: none (no rank more than %.0f%% slower than the median in any phase)\n", 100*threshold)
	}
	return fmt.Sprintf("stragglers (ranks more than %.0f%% slower than the median, time per iteration):", 100*threshold) + b.String() + "\n"
}

// median returns the median of xs (not empty), the mean of the middle two
// for an even count.
func median(xs []int64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return (float64(s[n/2-1]) + float64(s[n/2])) / 2
}
