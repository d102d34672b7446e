package train

import (
	"bytes"
	"strings"
	"testing"
)

// TestTimingLogLevel: --timing-log-level reports, after each iteration
// line, the timers at or below the level in Megatron's format: at 1 the
// pipeline pass and the optimizer, at 2 also the steps and the P2P calls
// (a two-stage pipeline's sends and receives); --timing-log-option max
// and all change the report's head; level 0 reports none.
func TestTimingLogLevel(t *testing.T) {
	run := func(level int, option string) string {
		a := ppArgs(2, 1, 2)
		a.TrainIters, a.LogInterval, a.TimingLogLevel, a.TimingLogOption = 4, 2, level, option
		var out bytes.Buffer
		if _, err := Run(t.Context(), a, Options{Out: &out}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	one := run(1, "")
	if strings.Count(one, "(min, max) time across ranks (ms):") != 2 || !strings.Contains(one, "\n    forward-backward ...............................: (") ||
		!strings.Contains(one, "\n    optimizer ......................................: (") || strings.Contains(one, "forward-compute") {
		t.Errorf("level 1:\n%s", one)
	}
	two := run(2, "minmax")
	for _, want := range []string{"forward-compute", "backward-compute", "forward-send", "backward-recv"} {
		if !strings.Contains(two, "\n    "+want+" ") {
			t.Errorf("level 2 lacks %s:\n%s", want, two)
		}
	}
	if s := run(2, "max"); !strings.Contains(s, "max time across ranks (ms):\n    forward-backward") {
		t.Errorf("max:\n%s", s)
	}
	if s := run(1, "all"); !strings.Contains(s, "times across ranks (ms):\n  forward-backward:\n     rank  0: ") || !strings.Contains(s, "\n     rank  1: ") {
		t.Errorf("all:\n%s", s)
	}
	if s := run(0, ""); strings.Contains(s, "time across ranks") {
		t.Errorf("level 0 reports timers:\n%s", s)
	}
}

// TestTimingLogFlagsRefused: a level outside 0–2 and an unknown option
// are refused, naming the flag.
func TestTimingLogFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		level  int
		option string
		want   string
	}{{3, "", "--timing-log-level 3"}, {-1, "", "--timing-log-level -1"}, {1, "median", `--timing-log-option "median"`}} {
		a := ppArgs(1, 1, 1)
		a.TimingLogLevel, a.TimingLogOption = c.level, c.option
		if err := a.Validate(1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
