package train

import (
	"context"

	"slices"
	"strings"
	"testing"
)

// stragglerTimes returns gathered times [rank][timedNames] with
// forward-compute and backward-compute set per rank, in ms for 2
// iterations, and the forward-backward pass (with its waits) equal.
func stragglerTimes(fb, opt []int64) [][]int64 {
	fbi, opti := slices.Index(timedNames, "forward-compute"), slices.Index(timedNames, "backward-compute")
	out := make([][]int64, len(fb))
	for r := range out {
		out[r] = make([]int64, len(timedNames))
		out[r][fbi], out[r][opti] = 2*fb[r]*1e6, 2*opt[r]*1e6
		out[r][slices.Index(timedNames, "forward-backward")] = 1000e6
	}
	return out
}

// TestFormatStragglers: ranks over the median by more than the threshold
// are named, the slowest first and at most count per phase; a phase one
// rank ran has no median; none gives one line.
func TestFormatStragglers(t *testing.T) {
	for _, c := range []struct {
		fb, opt []int64
		count   int
		want    string
	}{
		{[]int64{100, 102, 98, 150}, []int64{10, 10, 10, 10}, 1,
			"stragglers (ranks more than 10% slower than the median, time per iteration):\n    forward-compute: median 101.00 ms; rank 3 150.00 ms (+49%)\n"},
		{[]int64{100, 130, 100, 150, 100}, []int64{10, 10, 10, 10, 30}, 2,
			"stragglers (ranks more than 10% slower than the median, time per iteration):\n    forward-compute: median 100.00 ms; rank 3 150.00 ms (+50%), rank 1 130.00 ms (+30%)\n    backward-compute: median 10.00 ms; rank 4 30.00 ms (+200%)\n"},
		{[]int64{100, 105, 0}, []int64{0, 0, 50}, 1, "stragglers: none (no rank more than 10% slower than the median in any phase)\n"},
	} {
		if got := formatStragglers(stragglerTimes(c.fb, c.opt), 2, 0.1, c.count); got != c.want {
			t.Errorf("forward-backward %v, optimizer %v, count %d:\n got %q\nwant %q", c.fb, c.opt, c.count, got, c.want)
		}
	}
}

// TestLogStraggler: --log-straggler reports after every interval's line,
// without --timing-log-level's report.
func TestLogStraggler(t *testing.T) {
	a := mockArgs(4)
	a.WorldSize, a.LogInterval, a.LogStraggler = 2, 2, true
	var out strings.Builder
	if _, err := Run(context.Background(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "stragglers"); n != 2 || strings.Contains(out.String(), "time across ranks") {
		t.Errorf("%d straggler reports, want 2, and no timer report:\n%s", n, out.String())
	}

}

// TestStragglerWithTimingLevelOne: --log-straggler runs the level-2
// timers, and --timing-log-level 1's report still lists only its own.
func TestStragglerWithTimingLevelOne(t *testing.T) {
	a := mockArgs(4)
	a.WorldSize, a.LogInterval, a.LogStraggler, a.TimingLogLevel = 2, 2, true, 1
	var out strings.Builder
	if _, err := Run(context.Background(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "forward-backward ...") || strings.Contains(s, "forward-compute ...") {
		t.Errorf("the level-1 report lists other timers, or not its own:\n%s", s)
	}
}
