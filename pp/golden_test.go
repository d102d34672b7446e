package pp

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/internal/golden"
)

// goldenCases are the schedules whose action lists are kept under
// testdata/: a tabular result is checked against a golden file that a
// reviewer reads (internal/golden).
var goldenCases = []struct {
	file string
	cfg  Config
}{
	{"1f1b_pp2_m4.golden", Config{PP: 2, Microbatches: 4}},
	{"interleaved_pp2_v2_m4_overlap.golden", Config{PP: 2, VPP: 2, Microbatches: 4, OverlapP2PComm: true}},
	{"interleaved_pp4_v2_m8_g4.golden", Config{PP: 4, VPP: 2, Microbatches: 8, GroupSize: 4}},
	{"interleaved_pp4_v2_m8_g4_flush_sync.golden", Config{PP: 4, VPP: 2, Microbatches: 8, GroupSize: 4,
		OverlapP2PComm: true, OverlapP2PCommWarmupFlush: true, GradSyncFunc: true, ParamSyncFunc: true}},
	{"no_pipelining_m3.golden", Config{PP: 1, Microbatches: 3}},
}

// render is a golden file's text: the grid, the JSON document and every
// rank's actions one per line.
func render(t *testing.T, ss []*Schedule) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(FormatGrid(ss))
	j, err := FormatJSON(ss)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n" + string(j) + "\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "\nrank %d (%s, warmup %d, remaining %d):\n", s.Rank, s.Name, s.Warmup, s.Remaining)
		for i, a := range s.Actions {
			fmt.Fprintf(&b, "%4d  %v\n", i, a)
		}
	}
	return b.String()
}

func TestGoldenSchedules(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.file, func(t *testing.T) {
			ss, err := BuildAll(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(ss); err != nil {
				t.Fatal(err)
			}
			got := render(t, ss)
			path := filepath.Join("testdata", c.file)
			golden.Check(t, path, []byte(got))
		})
	}
}
