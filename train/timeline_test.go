package train

import (
	"context"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/pp"
)

// TestTimelineBubble: on a hand-made two-stage timeline whose ranks each
// compute 6 of the 8 time units, the measured bubble is 25% per rank.
func TestTimelineBubble(t *testing.T) {
	tl := &timeline{pp: 2, vpp: 1, m: 3, ppRank: []int{0, 1}, ranks: [][]span{
		{{kind: pp.Forward, start: 0, end: 1}, {kind: pp.Forward, start: 1, end: 2}, {kind: pp.Comm, start: 2, end: 3}, {kind: pp.Backward, start: 4, end: 8}},
		{{kind: pp.Forward, start: 1, end: 2}, {kind: pp.Backward, start: 2, end: 7}},
	}}
	for r, b := range tl.bubbles() {
		if math.Abs(b-0.25) > 1e-12 {
			t.Errorf("rank %d: bubble %g, want 0.25", r, b)
		}
	}
	if b := bubble([]float64{0.3, 0.1, 0.2}); b != 0.1 {
		t.Errorf("bubble of idle fractions 0.3, 0.1, 0.2 = %g, want the busiest rank's 0.1", b)
	}
	if got := theoreticalBubble(2, 1, 8); math.Abs(got-1.0/9) > 1e-12 {
		t.Errorf("theoretical bubble (P=2, M=8) = %g, want 1/9", got)
	}
	if got := theoreticalBubble(4, 2, 8); math.Abs(got-3.0/19) > 1e-12 {
		t.Errorf("theoretical bubble (P=4, V=2, M=8) = %g, want 3/19", got)
	}
}

// TestProfileSchedule: --profile-schedule writes a well-formed SVG with a
// row per rank and the measured and theoretical bubbles.
func TestProfileSchedule(t *testing.T) {
	a := ppArgs(2, 1, 2)
	a.TrainIters, a.LRWarmupIters = 2, 0
	a.ProfileSchedule = filepath.Join(t.TempDir(), "schedule.svg")
	var out strings.Builder
	if _, err := Run(context.Background(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(a.ProfileSchedule)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name   `xml:"svg"`
		Texts   []string   `xml:"text"`
		Rects   []struct{} `xml:"rect"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the timeline is not well-formed SVG: %v", err)
	}
	rows := 0
	for _, s := range doc.Texts {
		if strings.HasPrefix(s, "rank ") {
			rows++
		}
	}
	// 4 microbatches, a forward and a backward each, on two ranks.
	if rows != 2 || len(doc.Rects) < 16 {
		t.Errorf("%d rank rows and %d boxes, want 2 and at least 16", rows, len(doc.Rects))
	}
	if !strings.Contains(string(b), "theoretical (P−1)/(V·M+P−1) = 20.0%") {
		t.Error("the title does not give the theoretical bubble 1/5 of P=2, M=4")
	}
	if !strings.Contains(out.String(), "measured bubble") {
		t.Errorf("the log does not report the measured bubble:\n%s", out.String())
	}
}
