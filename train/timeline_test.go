package train

import (
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
